// Loop-invariant values of while bodies and conditions, computed once (cpu_lowering.h).
#include <set>

#include "compiler/codegen/cpu_lowering.h"
#include "compiler/hlo/collectives.h"

namespace hlocache::compiler::lowering_internal {
namespace {

// The most bytes of hoisted values one computation keeps, so that a loop body's invariants do
// not pin unbounded memory for the life of the executable.
constexpr int64_t kMostHoistedBytes = int64_t{64} << 20;

// Ops whose value depends on more than their operands, or that do more than compute a value.
bool ComputesOnlyItsValue(const hlo::Module& m, const Instruction& inst) {
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kParameter || op == Opcode::kRng || op == Opcode::kRngBitGenerator ||
      op == Opcode::kRngGetAndUpdateState || op == Opcode::kAfterAll || hlo::HasEffects(op) ||
      hlo::IsCollective(m, inst)) {
    return false;
  }
  std::vector<const Shape*> leaves;
  hlo::AppendLeafShapes(inst.shape, leaves);
  for (const Shape* s : leaves) {
    if (s->type == PrimitiveType::kToken || s->IsDynamic()) return false;
  }
  return true;
}

}  // namespace

void Lowering::MarkLoopComputations(const std::vector<int>& reached) {
  loop_computation_.assign(m_.computations.size(), false);
  for (size_t c = 0; c < m_.computations.size(); ++c) {
    if (reached[c] != 2) continue;
    for (const Instruction& inst : m_.computations[c].instructions) {
      if (inst.opcode.opcode != Opcode::kWhile) continue;
      for (const char* role : {"body", "condition"}) {
        for (int32_t callee : m_.CalleesOf(inst, role)) {
          if (callee >= 0 && static_cast<size_t>(callee) < loop_computation_.size()) {
            loop_computation_[static_cast<size_t>(callee)] = true;
          }
        }
      }
    }
  }
}

bool Lowering::PureComputation(int32_t c) {
  if (pure_.size() != m_.computations.size()) pure_.assign(m_.computations.size(), 0);
  const auto slot = static_cast<size_t>(c);
  if (pure_[slot] != 0) return pure_[slot] == 1;
  pure_[slot] = 2;  // Until shown pure (and for a cycle, which Reach refuses anyway).
  for (const Instruction& inst : m_.computations[slot].instructions) {
    if (inst.opcode.opcode != Opcode::kParameter && !ComputesOnlyItsValue(m_, inst)) return false;
    for (int32_t callee : inst.callees) {
      if (!PureComputation(callee)) return false;
    }
  }
  pure_[slot] = 1;
  return true;
}

std::vector<int32_t> Lowering::PlanHoisting(int32_t c, std::vector<bool>& invariant) {
  const Computation& comp = *comp_;
  const size_t n = comp.instructions.size();
  invariant.assign(n, false);
  if (static_cast<size_t>(c) >= loop_computation_.size() ||
      !loop_computation_[static_cast<size_t>(c)]) {
    return {};
  }
  bool worth_it = false;  // Something beyond constants and broadcasts of scalars is hoisted.
  for (size_t i = 0; i < n; ++i) {
    const Instruction& inst = comp.instructions[i];
    if (!live_[i] || !ComputesOnlyItsValue(m_, inst)) continue;
    bool all = true;
    for (int32_t o : inst.operands) all = all && invariant[static_cast<size_t>(o)];
    for (int32_t callee : inst.callees) all = all && PureComputation(callee);
    if (!all) continue;
    invariant[i] = true;
    const Opcode op = inst.opcode.opcode;
    if (op != Opcode::kConstant && !IsScalarBroadcast(inst)) worth_it = true;
  }
  // Hoisted: the invariant values a step reads (an operand of a value that is not invariant,
  // or the root).
  std::set<int32_t> read;
  for (size_t i = 0; i < n; ++i) {
    if (!live_[i] || invariant[i]) continue;
    for (int32_t o : comp.instructions[i].operands) {
      if (invariant[static_cast<size_t>(o)]) read.insert(o);
    }
  }
  if (invariant[static_cast<size_t>(comp.root)]) read.insert(comp.root);
  int64_t bytes = 0;
  for (int32_t h : read) bytes += Bytes(Inst(comp, h).shape);
  if (!worth_it || read.empty() || bytes > kMostHoistedBytes) {
    invariant.assign(n, false);
    return {};
  }
  return {read.begin(), read.end()};
}

Status Lowering::LowerInvariants(int32_t c, const std::vector<int32_t>& hoisted,
                                 const std::vector<bool>& invariant, SegmentedFunction& step) {
  const Computation& comp = *comp_;
  // What the hoisted values need: computed by the invariants' function only.
  std::vector<bool> needed(comp.instructions.size(), false);
  for (int32_t h : hoisted) needed[static_cast<size_t>(h)] = true;
  for (size_t i = comp.instructions.size(); i-- > 0;) {
    if (!needed[i]) continue;
    for (int32_t o : comp.instructions[i].operands) needed[static_cast<size_t>(o)] = true;
  }
  // Each hoisted value is read after its function's last instruction: never fused away.
  for (int32_t h : hoisted) ++uses_[static_cast<size_t>(h)];

  const std::string name = FunctionName(c) + "_invariants";
  std::string signature = "int " + name + "(";
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<std::pair<int32_t, const Shape*>> leaves;  // Each hoisted leaf: its value, shape.
  for (int32_t h : hoisted) {
    std::vector<const Shape*> shapes;
    AppendLeafShapes(Inst(comp, h).shape, shapes);
    for (const Shape* s : shapes) {
      const std::string r = "r" + std::to_string(params.size());
      const std::string type = std::string(CType(s->type)) + "*";
      signature += std::string(params.empty() ? "" : ", ") + type + " " + r;
      params.emplace_back(r, type);
      leaves.emplace_back(h, s);
    }
  }
  signature += ")";
  SegmentedFunction function(name, signature, params, options_.segment_bytes);
  function_ = &function;
  for (size_t i = 0; i < comp.instructions.size(); ++i) {
    if (!needed[i] || !invariant[i]) continue;
    const Status lowered = Lower(static_cast<int32_t>(i));
    if (!lowered.ok()) {
      function_ = &step;
      return lowered;
    }
    function.EndInstruction();
  }
  function_ = &step;
  std::string epilogue;
  size_t r = 0;
  for (int32_t h : hoisted) {
    const auto& value = values_[static_cast<size_t>(h)];
    for (const Leaf& leaf : value) {
      epilogue += "  std::memcpy(r" + std::to_string(r++) + ", " + leaf.ptr + ", " +
                  Int(Bytes(*leaf.shape)) + ");\n";
    }
  }
  if (r != leaves.size()) {
    return Malformed(Inst(comp, hoisted.front()), "a value without its shape's leaves");
  }
  for (CodePiece& piece : function.Finish(epilogue)) pieces_.push_back(std::move(piece));

  // The step's first code: the values, computed by the first step of any loop that runs this
  // computation (thread-safe, as every static with a dynamic initializer), then kept in the
  // executable's own zero-initialized storage, freed with it.
  std::string code = "  {\n";
  std::string call = name + "(";
  for (size_t k = 0; k < leaves.size(); ++k) {
    const Shape& s = *leaves[k].second;
    const std::string store = "hc_hoisted_" + std::to_string(k);
    code += "    alignas(64) static " + std::string(CType(s.type)) + " " + store + "[" +
            Int(std::max<int64_t>(1, (Bytes(s) + hlo::BufferElementBytes(s.type) - 1) /
                                         hlo::BufferElementBytes(s.type))) +
            "];\n";
    call += std::string(k ? ", " : "") + store;
  }
  code += "    static const int hc_hoisted = " + call + ");\n    if (hc_hoisted != 0) return 1;\n";
  for (int32_t h : hoisted) {
    values_[static_cast<size_t>(h)].clear();
    fused_[static_cast<size_t>(h)] = std::nullopt;
  }
  for (size_t k = 0; k < leaves.size(); ++k) {
    const auto [h, shape] = leaves[k];
    const std::string ptr = Fresh("hoisted");
    DeclarePointer(ptr, *shape, {});
    code += "    " + ptr + " = hc_hoisted_" + std::to_string(k) + ";\n";
    values_[static_cast<size_t>(h)].push_back({ptr, shape});
  }
  step.body() += code + "  }\n";
  step.EndInstruction();
  return Status::Ok();
}

}  // namespace hlocache::compiler::lowering_internal
