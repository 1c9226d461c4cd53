#include "compiler/codegen/cpu_codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "compiler/codegen/cpu_emitter.h"
#include "compiler/codegen/cpu_extended_ops.h"
#include "compiler/codegen/cpu_prelude.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/codegen/cpu_units.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/dynamic_dims.h"
#include "compiler/semantics/dynamic_shapes.h"
#include "compiler/semantics/half.h"
#include "compiler/semantics/linalg.h"
#include "compiler/semantics/prng.h"

namespace hlocache::compiler {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Intermediate values up to this size live on the stack; bigger ones on the heap.
constexpr int64_t kStackBufferBytes = 512;
// Constants of up to this many elements are defined in every translation unit (the compiler
// folds them into the code that reads them); larger ones once.
constexpr size_t kSmallConstantElements = 64;
// A chain of fused elementwise ops longer than this is cut by a buffer, so that no expression
// grows deep enough to slow the C++ compiler down.
constexpr int kMaxFusionDepth = 24;

using hlo::AppendLeafShapes;
using hlo::SameValues;

class Lowering : public CpuEmitter {
 public:
  Lowering(const hlo::Module& m, const CpuLoweringOptions& options) : m_(m), options_(options) {}

  // ---- CpuEmitter ------------------------------------------------------------------------------

  const hlo::Module& module() const override { return m_; }
  const Computation& computation() const override { return *comp_; }
  const std::vector<Leaf>& Leaves(int32_t i) const override {
    return values_[static_cast<size_t>(i)];
  }
  void Emit(std::string_view code) override { Body() += code; }
  const std::vector<Leaf>& MaterializeLeaves(int32_t index, const Instruction& inst) override {
    std::vector<const Shape*> leaves;
    AppendLeafShapes(inst.shape, leaves);
    std::vector<Leaf>& out = values_[static_cast<size_t>(index)];
    out.clear();
    for (size_t j = 0; j < leaves.size(); ++j) {
      const std::string name = leaves.size() == 1 && inst.shape.IsArray()
                                   ? Var(index)
                                   : Var(index) + "_" + std::to_string(j);
      Declare(name, *leaves[j]);
      out.push_back({name, leaves[j]});
    }
    return out;
  }
  void Bind(int32_t index, std::vector<Leaf> leaves) override {
    values_[static_cast<size_t>(index)] = std::move(leaves);
  }
  std::string FunctionName(int32_t c) const override { return "hc_comp" + std::to_string(c); }
  std::string Fresh(std::string_view prefix) override {
    return std::string(prefix) + "_" + std::to_string(fresh_++);
  }

  // The module's translation units (cpu_units.h): each starts with the prelude and every
  // declaration; the functions and large constants are spread over them.
  Result<std::vector<std::string>> Run() {
    if (m_.entry < 0) return Error(InvalidArgument(m_.filename() + ": no entry computation"));
    std::vector<int> state(m_.computations.size(), 0);
    HLOCACHE_RETURN_IF_ERROR(Reach(m_.entry, state));
    pieces_.clear();
    pieces_.push_back({"", EntryPoint()});
    for (size_t c = 0; c < m_.computations.size(); ++c) {
      if (state[c] != 2) continue;
      HLOCACHE_RETURN_IF_ERROR(LowerComputation(static_cast<int32_t>(c)));
    }
    std::string shared = kCpuPrelude;
    shared += "namespace hlocache_rt {\n" + std::string(kPrngSource) + "\n" +
              std::string(kLinalgSource) + "\n" + kCpuLinalgPrelude + kDynamicDimsSource + "\n" +
              kCpuDynamicPrelude + "}  // namespace hlocache_rt\n";
    for (const CodePiece& p : pieces_) shared += p.declaration;
    shared += small_constants_ + "\n";
    return PackUnits(shared, pieces_, options_);
  }

 private:
  // The entry point: leaves of the parameters in, leaves of the result out.
  std::string EntryPoint() const {
    const Computation& entry = m_.computations[static_cast<size_t>(m_.entry)];
    std::string call = FunctionName(m_.entry) + "(";
    std::vector<const Shape*> leaves;
    for (int32_t p : entry.parameters) {
      if (p >= 0) AppendLeafShapes(Inst(entry, p).shape, leaves);
    }
    size_t n = 0;
    for (size_t j = 0; j < leaves.size(); ++j, ++n) {
      const char* t = CType(leaves[j]->type);
      call += std::string(n ? ", " : "") + "static_cast<const " + (t ? t : "void") + "*>(params[" +
              std::to_string(j) + "])";
    }
    leaves.clear();
    if (entry.root >= 0) AppendLeafShapes(Inst(entry, entry.root).shape, leaves);
    for (size_t j = 0; j < leaves.size(); ++j, ++n) {
      const char* t = CType(leaves[j]->type);
      call += std::string(n ? ", " : "") + "static_cast<" + (t ? t : "void") + "*>(results[" +
              std::to_string(j) + "])";
    }
    call += ")";
    // hlocache_entry_host runs with a host to transfer with, kept in a thread-local for the
    // transfers to find (the thread's own, restored after, so runs may nest); hlocache_entry
    // without one. A program without transfers has no use for the host, and no thread-local.
    std::string body = "  return " + call + ";\n";
    if (HasHostTransfers()) {
      body =
          "  const hc_host* const outer_host = hc_current_host;\n"
          "  const bool outer_failed = hc_host_failed;\n  hc_current_host = host;\n"
          "  hc_host_failed = false;\n  const int status = " +
          call +
          ";\n  const bool failed = hc_host_failed;\n  hc_current_host = outer_host;\n"
          "  hc_host_failed = outer_failed;\n  return failed ? 2 : status;\n";
    }
    return "extern \"C\" __attribute__((visibility(\"default\"))) int hlocache_entry_host(\n"
           "    const void* const* params, void* const* results,\n"
           "    [[maybe_unused]] const hlocache_rt::hc_host* host) {\n" +
           body +
           "}\n\n"
           "extern \"C\" __attribute__((visibility(\"default\"))) int hlocache_entry(\n"
           "    const void* const* params, void* const* results) {\n"
           "  return hlocache_entry_host(params, results, nullptr);\n}\n\n";
  }

  // Whether an instruction of the module transfers with the host.
  bool HasHostTransfers() const {
    for (const Computation& c : m_.computations) {
      for (const Instruction& inst : c.instructions) {
        if (hlo::IsHostTransfer(inst.opcode.opcode)) return true;
      }
    }
    return false;
  }

  static const Instruction& Inst(const Computation& c, int32_t i) {
    return c.instructions[static_cast<size_t>(i)];
  }
  static std::string Var(int32_t i) { return "v" + std::to_string(i); }

  Status Unsupported(const Instruction& inst, const std::string& what) const override {
    return FailedPrecondition(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) +
                              ": the CPU code generator does not support " + what +
                              " (instruction '" + std::string(inst.name) + "')");
  }
  Status Malformed(const Instruction& inst, const std::string& what) const override {
    return InvalidArgument(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) + ": '" +
                           std::string(inst.name) + "' (" +
                           std::string(hlo::OpcodeName(inst.opcode.opcode)) + "): " + what);
  }

  // Marks the computations the entry reaches (2 = reached and finished); a cycle is refused.
  Status Reach(int32_t c, std::vector<int>& state) {
    if (c < 0 || static_cast<size_t>(c) >= m_.computations.size()) {
      return InvalidArgument(m_.filename() + ": a call to a computation that does not exist");
    }
    if (state[static_cast<size_t>(c)] == 2) return Status::Ok();
    const Computation& comp = m_.computations[static_cast<size_t>(c)];
    if (state[static_cast<size_t>(c)] == 1) {
      return InvalidArgument(m_.filename() + ": computation '" + std::string(comp.name) +
                             "' calls itself");
    }
    state[static_cast<size_t>(c)] = 1;
    for (const Instruction& inst : comp.instructions) {
      const Opcode op = inst.opcode.opcode;
      if (inst.callees.empty()) continue;
      if (IsExtendedCpuOp(op) && inst.opcode.phase == hlo::AsyncPhase::kNone) {
        // Loop bodies, branches, comparators, update computations: each is a function.
        for (int32_t callee : inst.callees) HLOCACHE_RETURN_IF_ERROR(Reach(callee, state));
        continue;
      }
      if (op != Opcode::kCall && op != Opcode::kFusion && op != Opcode::kReduce) {
        return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
      }
      if (inst.callees.size() != 1) return Unsupported(inst, "several called computations");
      HLOCACHE_RETURN_IF_ERROR(Reach(inst.callees[0], state));
    }
    state[static_cast<size_t>(c)] = 2;
    return Status::Ok();
  }

  Status CheckLeaf(const Instruction& inst, const Shape& s) const {
    if (s.IsTuple()) return Status::Ok();
    if (CType(s.type) == nullptr) {
      return Unsupported(inst, "the element type " + hlo::CanonicalShapeText(s));
    }
    if (!s.BoundElementCount()) {
      return Unsupported(inst, s.IsDynamic() ? "unbounded dynamic dimensions" : "this shape");
    }
    return Status::Ok();
  }
  Status CheckShape(const Instruction& inst, const Shape& s) const {
    if (s.IsTuple()) {
      for (const Shape& e : s.tuple_elements) HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, e));
      return Status::Ok();
    }
    return CheckLeaf(inst, s);
  }

  // ---- One computation as one static function -------------------------------------------

  Status LowerComputation(int32_t c) {
    comp_ = &m_.computations[static_cast<size_t>(c)];
    const Computation& comp = *comp_;
    if (comp.root < 0) return InvalidArgument(m_.filename() + ": a computation without a root");
    values_.assign(comp.instructions.size(), {});
    fused_.assign(comp.instructions.size(), std::nullopt);
    depth_.assign(comp.instructions.size(), 0);
    uses_.assign(comp.instructions.size(), 0);
    user_.assign(comp.instructions.size(), {-1, 0});
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      const Instruction& inst = comp.instructions[i];
      for (int32_t o : inst.operands) {
        if (o < 0 || static_cast<size_t>(o) >= i) {
          return Unsupported(inst, "operands defined after their use");
        }
      }
    }
    // What the root does not depend on computes nothing anyone sees: it is not lowered (the
    // ops lowered here have no effects but their values).
    live_.assign(comp.instructions.size(), false);
    live_[static_cast<size_t>(comp.root)] = true;
    for (size_t i = comp.instructions.size(); i-- > 0;) {
      if (!live_[i] && !hlo::HasEffects(comp.instructions[i].opcode.opcode)) continue;
      live_[i] = true;
      for (int32_t o : comp.instructions[i].operands) live_[static_cast<size_t>(o)] = true;
    }
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      if (!live_[i]) continue;
      const Instruction& inst = comp.instructions[i];
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        const auto o = static_cast<size_t>(inst.operands[k]);
        ++uses_[o];
        user_[o] = {static_cast<int32_t>(i), k};
      }
    }
    ++uses_[static_cast<size_t>(comp.root)];

    std::string signature = "int " + FunctionName(c) + "(";
    std::vector<std::pair<std::string, std::string>> params;
    size_t n = 0;
    std::vector<std::string> parameter_leaves;
    for (size_t p = 0; p < comp.parameters.size(); ++p) {
      if (comp.parameters[p] < 0) return InvalidArgument(m_.filename() + ": a missing parameter");
      const Instruction& param = Inst(comp, comp.parameters[p]);
      HLOCACHE_RETURN_IF_ERROR(CheckShape(param, param.shape));
      std::vector<const Shape*> leaves;
      AppendLeafShapes(param.shape, leaves);
      for (const Shape* s : leaves) {
        const std::string name = "p" + std::to_string(n);
        const std::string type = "const " + std::string(CType(s->type)) + "*";
        signature += std::string(n ? ", " : "") + type + " " + name;
        params.emplace_back(name, type);
        parameter_leaves.push_back(name);
        values_[static_cast<size_t>(comp.parameters[p])].push_back({name, s});
        ++n;
      }
    }
    const Instruction& root = Inst(comp, comp.root);
    HLOCACHE_RETURN_IF_ERROR(CheckShape(root, root.shape));
    std::vector<const Shape*> result_leaves;
    AppendLeafShapes(root.shape, result_leaves);
    for (size_t j = 0; j < result_leaves.size(); ++j, ++n) {
      const std::string name = "r" + std::to_string(j);
      const std::string type = std::string(CType(result_leaves[j]->type)) + "*";
      signature += std::string(n ? ", " : "") + type + " " + name;
      params.emplace_back(name, type);
    }
    signature += ")";

    SegmentedFunction function(FunctionName(c), signature, std::move(params),
                               options_.segment_bytes);
    function_ = &function;
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      if (!live_[i]) continue;
      HLOCACHE_RETURN_IF_ERROR(Lower(static_cast<int32_t>(i)));
      function.EndInstruction();
    }
    function_ = nullptr;
    const auto& out = values_[static_cast<size_t>(comp.root)];
    if (out.size() != result_leaves.size()) {
      return Malformed(root, "the root's value does not have the root's shape");
    }
    std::string epilogue;
    for (size_t j = 0; j < out.size(); ++j) {
      const std::string r = "r" + std::to_string(j);
      const std::string copy =
          "std::memcpy(" + r + ", " + out[j].ptr + ", " + Int(Bytes(*out[j].shape)) + ");\n";
      // A caller may pass a parameter leaf's own buffer for the result the root hands it on to
      // (a loop's state passed through): then nothing is copied, nor written.
      const bool from_parameter = std::find(parameter_leaves.begin(), parameter_leaves.end(),
                                            out[j].ptr) != parameter_leaves.end();
      epilogue += from_parameter ? "  if (" + r + " != " + out[j].ptr + ") " + copy : "  " + copy;
    }
    for (CodePiece& piece : function.Finish(epilogue)) pieces_.push_back(std::move(piece));
    return Status::Ok();
  }

  bool TouchesDynamicShapes(const Instruction& inst) const {
    if (hlo::HasDynamicLeaf(inst.shape)) return true;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      if (hlo::HasDynamicLeaf(OperandShape(inst, k))) return true;
    }
    return false;
  }

  // The ops of dynamic shapes are those of interp/dynamic_shapes.h.
  Status CheckDynamicShapes(const Instruction& inst) const {
    const std::string why = interp::WhyNotDynamic(inst, OperandShapes(inst));
    return why.empty() ? Status::Ok() : Unsupported(inst, why);
  }

  // The code of the function being written.
  std::string& Body() { return function_->body(); }

  static int64_t Count(const Shape& s) { return ElementCount(s); }
  static int64_t Bytes(const Shape& s) { return ByteCount(s); }

  // Declares a fresh buffer for an array of shape `s` named `name`, owned by the function.
  void Declare(const std::string& name, const Shape& s) override {
    // A dynamic shape's buffer has room for its sizes after the elements (cpu_source.h).
    const int64_t width = hlo::BufferElementBytes(s.type);
    const int64_t count = Count(s) + (Bytes(s) - DataBytes(s) + width - 1) / width;
    function_->Declare(
        {name, CType(s.type), std::max<int64_t>(count, 1), width, Bytes(s) > kStackBufferBytes});
  }

  void DeclarePointer(const std::string& name, const Shape& s,
                      std::vector<std::string> may_point_to) override {
    function_->DeclarePointer({name, CType(s.type), std::move(may_point_to)});
  }

  // ---- Fusion of elementwise chains ---------------------------------------------------------
  //
  // An elementwise op computes element i from element i of its operands. When such an op has
  // exactly one use, and that use reads it at the same index i, its value is never stored: its
  // expression is substituted into its user's loop. Chains of them become one loop.

  static bool IsElementwise(const Instruction& inst) {
    switch (inst.opcode.opcode) {
      case Opcode::kParameter:
      case Opcode::kConstant:
      case Opcode::kTuple:
      case Opcode::kGetTupleElement:
      case Opcode::kCall:
      case Opcode::kFusion:
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kSlice:
      case Opcode::kReverse:
      case Opcode::kPad:
      case Opcode::kConcatenate:
      case Opcode::kDynamicSlice:
      case Opcode::kDynamicUpdateSlice:
      case Opcode::kReduce:
      case Opcode::kDot:
        return false;
      default:
        if (inst.opcode.phase != hlo::AsyncPhase::kNone || !inst.callees.empty() ||
            !inst.shape.IsArray()) {
          return false;
        }
        return interp::IsCoreOp(inst.opcode.opcode) ||
               IsElementwiseExtendedCpuOp(inst.opcode.opcode);
    }
  }

  // Whether `user` reads its operand `k` at the index of the element it computes.
  bool ReadsAtIndex(const Instruction& user, size_t k) const {
    // A reduce reads each element of its operands once, at the element's own index (its inits
    // once, as scalars).
    if (user.opcode.opcode == Opcode::kReduce) return k < user.operands.size() / 2;
    if (!IsElementwise(user)) return false;
    const Opcode op = user.opcode.opcode;
    if (op == Opcode::kSelect && k == 0) return Count(OperandShape(user, 0)) == Count(user.shape);
    if (op == Opcode::kClamp && k != 1) return Count(OperandShape(user, k)) == Count(user.shape);
    return true;
  }

  // A broadcast of a scalar is one load per element: as cheap to fuse as any elementwise op.
  bool IsScalarBroadcast(const Instruction& inst) const {
    return inst.opcode.opcode == Opcode::kBroadcast && inst.operands.size() == 1 &&
           Count(OperandShape(inst, 0)) == 1 && !OperandShape(inst, 0).IsDynamic() &&
           inst.shape.IsArray();
  }

  bool Fusible(int32_t i) const {
    const Instruction& inst = Inst(*comp_, i);
    if (!(IsElementwise(inst) || IsScalarBroadcast(inst)) || uses_[static_cast<size_t>(i)] != 1 ||
        i == comp_->root || inst.shape.IsDynamic()) {
      return false;  // A dynamic value keeps a buffer: its sizes live there.
    }
    const auto [user, slot] = user_[static_cast<size_t>(i)];
    if (user < 0) return false;
    const Instruction& u = Inst(*comp_, user);
    return ReadsAtIndex(u, slot) &&
           (u.opcode.opcode == Opcode::kReduce || Count(u.shape) == Count(inst.shape));
  }

  // Element i of operand k: the fused expression, or a load from its buffer.
  std::string Read(const Instruction& inst, size_t k) const override {
    const auto o = static_cast<size_t>(inst.operands[k]);
    if (fused_[o]) return "(" + *fused_[o] + ")";
    return values_[o][0].ptr + "[i]";
  }
  // Operand k at element i, or its one element when it is a scalar next to a bigger result.
  std::string ReadOrScalar(const Instruction& inst, size_t k) const {
    if (Count(OperandShape(inst, k)) == 1 && Count(inst.shape) != 1) return Buffer(inst, k) + "[0]";
    return Read(inst, k);
  }

  // Defines instruction `index` elementwise by `expr` (in terms of i): fused into its user, or
  // one loop writing its buffer.
  void Elementwise(int32_t index, const Instruction& inst, const std::string& unwrapped) override {
    const std::string expr = SubByteWrapped(inst.shape.type, unwrapped);
    const auto slot = static_cast<size_t>(index);
    int depth = 0;
    for (int32_t o : inst.operands) depth = std::max(depth, depth_[static_cast<size_t>(o)]);
    if (Fusible(index) && depth < kMaxFusionDepth) {
      fused_[slot] = expr;
      depth_[slot] = depth + 1;
      return;
    }
    Declare(Var(index), inst.shape);
    values_[slot] = {{Var(index), &inst.shape}};
    Body() += "  for (int64_t i = 0; i < " + Int(Count(inst.shape)) + "; ++i) " + Var(index) +
              "[i] = " + expr + ";\n";
    if (inst.shape.IsDynamic()) {
      ResultSizes(inst, interp::ElementwiseSizeSources(inst, OperandShapes(inst)), Var(index));
    }
  }

  std::vector<const Shape*> OperandShapes(const Instruction& inst) const {
    std::vector<const Shape*> operands;
    for (size_t k = 0; k < inst.operands.size(); ++k) operands.push_back(&OperandShape(inst, k));
    return operands;
  }

  // Code storing the sizes of a dynamic result in `out`: each dimension's from the operand
  // dimension `sources` names (interp::SizeSources), or its bound.
  void ResultSizes(const Instruction& inst, const std::vector<interp::SizeSource>& sources,
                   const std::string& out) {
    const Shape& r = inst.shape;
    std::string code = "  {\n    int64_t dims[] = {";
    for (size_t i = 0; i < r.dims.size(); ++i) code += (i ? ", " : "") + Int(r.dims[i]);
    code += "};\n";
    std::vector<bool> read(inst.operands.size(), false);
    for (size_t i = 0; i < r.dims.size(); ++i) {
      const interp::SizeSource& from = sources[i];
      if (from.operand < 0) continue;
      const auto k = static_cast<size_t>(from.operand);
      const std::string var = "in" + std::to_string(k);
      if (!read[k]) code += DeclareDims(var, Buffer(inst, k), OperandShape(inst, k));
      read[k] = true;
      code +=
          "    dims[" + std::to_string(i) + "] = " + var + "[" + std::to_string(from.dim) + "];\n";
    }
    Body() += code + SetDims(out, r, "dims") + "  }\n";
  }

  // ---- Instructions --------------------------------------------------------------------------

  Status Lower(int32_t index) {
    const Instruction& inst = Inst(*comp_, index);
    const Opcode op = inst.opcode.opcode;
    if (op == Opcode::kParameter) return Status::Ok();  // Bound in the signature.
    if (inst.opcode.phase != hlo::AsyncPhase::kNone) return Unsupported(inst, "asynchronous ops");
    if (TouchesDynamicShapes(inst)) HLOCACHE_RETURN_IF_ERROR(CheckDynamicShapes(inst));
    if (IsExtendedCpuOp(op)) return LowerExtended(index, inst);
    if (!interp::IsCoreOp(op))
      return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
    HLOCACHE_RETURN_IF_ERROR(interp::CheckOperandCount(m_, inst));
    if (!inst.has_shape()) return Unsupported(inst, "instructions without a shape");
    HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, inst.shape));
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, OperandShape(inst, k)));
    }
    Body() += "  // " + std::string(inst.name) + " = " + std::string(hlo::OpcodeName(op)) + "\n";
    switch (op) {
      case Opcode::kTuple:
        return Tuple(index, inst);
      case Opcode::kGetTupleElement:
        return GetTupleElement(index, inst);
      case Opcode::kCall:
      case Opcode::kFusion:
        return Call(index, inst);
      default:
        break;
    }
    // Everything else computes arrays from arrays, with the interpreter's shape rules.
    std::vector<const Shape*> operand_shapes;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      operand_shapes.push_back(&OperandShape(inst, k));
    }
    HLOCACHE_RETURN_IF_ERROR(interp::CheckShapes(m_, inst, operand_shapes));
    if (op == Opcode::kReduce) return Reduce(index, inst);
    if (!inst.shape.IsArray()) return Unsupported(inst, "a tuple result");
    const std::string t = CType(inst.shape.type);
    switch (op) {
      case Opcode::kConstant:
        return Constant(index, inst);
      case Opcode::kIota: {
        const hlo::Attribute* a = inst.FindAttribute("iota_dimension");
        if (a == nullptr) return Malformed(inst, "no iota_dimension");
        HLOCACHE_ASSIGN_OR_RETURN(int64_t d, m_.Int(*a));
        const auto& dims = inst.shape.dims;
        if (d < 0 || static_cast<size_t>(d) >= dims.size()) return Malformed(inst, "bad dimension");
        int64_t inner = 1;
        for (size_t k = static_cast<size_t>(d) + 1; k < dims.size(); ++k) inner *= dims[k];
        Elementwise(index, inst,
                    "hc_cvt<" + t + ", int64_t>((i / " + Int(inner) + ") % " +
                        Int(dims[static_cast<size_t>(d)]) + ")");
        return Status::Ok();
      }
      case Opcode::kBitcast:
        if (!inst.shape.HasDefaultLayout() || !OperandShape(inst, 0).HasDefaultLayout()) {
          return Unsupported(inst, "bitcast between non-default layouts");
        }
        [[fallthrough]];
      case Opcode::kReshape:
      case Opcode::kCopy:
        if (OperandShape(inst, 0).type != inst.shape.type) {
          return Unsupported(inst, "a change of element type");
        }
        if (op == Opcode::kReshape &&
            (inst.shape.IsDynamic() || OperandShape(inst, 0).IsDynamic())) {
          return DynamicReshape(index, inst);
        }
        Elementwise(index, inst, Read(inst, 0));
        return Status::Ok();
      case Opcode::kConvert: {
        // A sub-byte target saturates (from floats) at its own width's bounds.
        const std::string width =
            IsSubByteInteger(inst.shape.type)
                ? ", " + std::to_string(hlo::PrimitiveTypeBits(inst.shape.type))
                : "";
        Elementwise(index, inst,
                    "hc_cvt<" + t + ", " + CType(OperandShape(inst, 0).type) + width + ">(" +
                        Read(inst, 0) + ")");
        return Status::Ok();
      }
      case Opcode::kSelect:
        Elementwise(index, inst,
                    ReadOrScalar(inst, 0) + " ? " + Read(inst, 1) + " : " + Read(inst, 2));
        return Status::Ok();
      case Opcode::kClamp:
        Elementwise(index, inst,
                    "hc_clamp<" + t + ">(" + ReadOrScalar(inst, 0) + ", " + Read(inst, 1) + ", " +
                        ReadOrScalar(inst, 2) + ")");
        return Status::Ok();
      case Opcode::kCompare:
        return Compare(index, inst);
      case Opcode::kBroadcast:
        if (IsScalarBroadcast(inst)) {
          Elementwise(index, inst, Buffer(inst, 0) + "[0]");
          return Status::Ok();
        }
        return AffineCopy(index, inst);
      case Opcode::kTranspose:
      case Opcode::kSlice:
      case Opcode::kReverse:
      case Opcode::kDynamicSlice:
        return AffineCopy(index, inst);
      case Opcode::kPad:
        return Pad(index, inst);
      case Opcode::kConcatenate:
        return Concatenate(index, inst);
      case Opcode::kDynamicUpdateSlice:
        return DynamicUpdateSlice(index, inst);
      case Opcode::kDot:
        return Dot(index, inst);
      default:
        break;
    }
    if (!inst.callees.empty() || inst.operands.empty() || inst.operands.size() > 2) {
      return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
    }
    return ElementwiseMath(index, inst);
  }

  // An op of one of the families of cpu_extended_ops.h, once its shapes are known to follow
  // the interpreter's rules.
  Status LowerExtended(int32_t index, const Instruction& inst) {
    if (!inst.has_shape()) return Unsupported(inst, "instructions without a shape");
    HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, inst.shape));
    std::vector<const Shape*> operand_shapes;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, OperandShape(inst, k)));
      operand_shapes.push_back(&OperandShape(inst, k));
    }
    HLOCACHE_RETURN_IF_ERROR(interp::CheckShapes(m_, inst, operand_shapes));
    Body() += "  // " + std::string(inst.name) + " = " +
              std::string(hlo::OpcodeName(inst.opcode.opcode)) + "\n";
    return LowerExtendedCpuOp(*this, index, inst);
  }

  Status Tuple(int32_t index, const Instruction& inst) {
    Shape expected;
    std::vector<Leaf> leaves;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      expected.tuple_elements.push_back(OperandShape(inst, k));
      const auto& v = values_[static_cast<size_t>(inst.operands[k])];
      leaves.insert(leaves.end(), v.begin(), v.end());
    }
    if (!SameValues(expected, inst.shape)) {
      return Malformed(inst, "the tuple's shape is not that of its operands");
    }
    values_[static_cast<size_t>(index)] = std::move(leaves);
    return Status::Ok();
  }

  Status GetTupleElement(int32_t index, const Instruction& inst) {
    const hlo::Attribute* a = inst.FindAttribute("index");
    if (a == nullptr) return Malformed(inst, "no index");
    HLOCACHE_ASSIGN_OR_RETURN(int64_t n, m_.Int(*a));
    const Shape& t = OperandShape(inst, 0);
    if (!t.IsTuple() || n < 0 || static_cast<size_t>(n) >= t.tuple_elements.size()) {
      return Malformed(inst, "index out of range");
    }
    if (!SameValues(t.tuple_elements[static_cast<size_t>(n)], inst.shape)) {
      return Malformed(inst, "the element's shape is not the result's");
    }
    size_t first = 0;
    for (size_t e = 0; e < static_cast<size_t>(n); ++e) {
      std::vector<const Shape*> skip;
      AppendLeafShapes(t.tuple_elements[e], skip);
      first += skip.size();
    }
    std::vector<const Shape*> mine;
    AppendLeafShapes(inst.shape, mine);
    const auto& all = values_[static_cast<size_t>(inst.operands[0])];
    values_[static_cast<size_t>(index)].assign(
        all.begin() + static_cast<ptrdiff_t>(first),
        all.begin() + static_cast<ptrdiff_t>(first + mine.size()));
    return Status::Ok();
  }

  Status Call(int32_t index, const Instruction& inst) {
    if (inst.callees.size() != 1) return Unsupported(inst, "a call without one computation");
    const int32_t callee = inst.callees[0];
    const Computation& f = m_.computations[static_cast<size_t>(callee)];
    if (f.parameters.size() != inst.operands.size()) {
      return Malformed(inst, "the operands do not match the called computation's parameters");
    }
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      if (f.parameters[k] < 0 ||
          !SameValues(Inst(f, f.parameters[k]).shape, OperandShape(inst, k))) {
        return Malformed(inst, "operand " + std::to_string(k) +
                                   " is not of the called computation's parameter shape");
      }
    }
    if (f.root < 0 || !SameValues(Inst(f, f.root).shape, inst.shape)) {
      return Malformed(inst, "the result is not of the called computation's root shape");
    }
    std::vector<const Shape*> leaves;
    AppendLeafShapes(inst.shape, leaves);
    std::vector<Leaf>& out = values_[static_cast<size_t>(index)];
    std::string args;
    for (int32_t o : inst.operands) {
      for (const Leaf& l : values_[static_cast<size_t>(o)])
        args += (args.empty() ? "" : ", ") + l.ptr;
    }
    for (size_t j = 0; j < leaves.size(); ++j) {
      const std::string name = Var(index) + "_" + std::to_string(j);
      Declare(name, *leaves[j]);
      out.push_back({name, leaves[j]});
      args += (args.empty() ? "" : ", ") + name;
    }
    Body() += "  if (" + FunctionName(callee) + "(" + args + ") != 0) return 1;\n";
    return Status::Ok();
  }

  // A constant is an array at namespace scope, so that every segment of its computation (see
  // cpu_units.h) can read it: a small one is defined in every unit, a large one in one.
  Status Constant(int32_t index, const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(interp::Literal value, interp::ConstantValue(m_, inst));
    if (value.is_tuple()) return Unsupported(inst, "tuple constants");
    const std::string t = CType(inst.shape.type);
    const std::string name =
        "hc_k" + std::to_string(comp_ - m_.computations.data()) + "_" + std::to_string(index);
    const std::string array =
        t + " " + name + "[" + std::to_string(std::max<size_t>(value.size(), 1)) + "]";
    std::string values = " = {";
    for (size_t e = 0; e < value.size(); ++e) {
      if (e) values += (e % 8 == 0) ? ",\n    " : ", ";
      values += ElementLiteral(value, e);
    }
    values += "};\n";
    if (value.size() <= kSmallConstantElements) {
      small_constants_ += "static const " + array + values;
    } else {
      pieces_.push_back({"extern const " + array + ";\n", "extern const " + array + values});
    }
    values_[static_cast<size_t>(index)] = {{name, &inst.shape}};
    return Status::Ok();
  }

  Status Compare(int32_t index, const Instruction& inst) {
    const hlo::Attribute* a = inst.FindAttribute("direction");
    if (a == nullptr) return Malformed(inst, "no direction");
    const std::string_view dir = m_.TokenText(a->value.begin);
    const char* c = CompareOperator(dir);
    if (c == nullptr) return Unsupported(inst, "direction " + std::string(dir));
    const char* key = CompareKey(m_, inst, OperandShape(inst, 0).type);
    Elementwise(index, inst,
                std::string(key) + Read(inst, 0) + ")) " + c + " " + key + Read(inst, 1) + "))");
    return Status::Ok();
  }

  Status ElementwiseMath(int32_t index, const Instruction& inst) {
    const Opcode op = inst.opcode.opcode;
    const std::string t = CType(inst.shape.type);
    const bool is_float = hlo::IsFloat(inst.shape.type);
    const bool logical =
        op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor || op == Opcode::kNot;
    // What HLO does not define does not reach the C++ compiler as code it would reject.
    if (op != Opcode::kIsFinite && inst.shape.type == PrimitiveType::kPred && !logical) {
      return Unsupported(inst, "arithmetic on pred");
    }
    if (is_float && logical) return Unsupported(inst, "bitwise ops on floats");
    auto call = [&](const std::string& f) {
      std::string e = f + "<" + t + ">(" + Read(inst, 0);
      if (inst.operands.size() == 2) e += ", " + Read(inst, 1);
      Elementwise(index, inst, e + ")");
      return Status::Ok();
    };
    auto math = [&](const std::string& f) {  // Floats only: computed in double, rounded once.
      if (!is_float) return Unsupported(inst, std::string(hlo::OpcodeName(op)) + " on integers");
      Elementwise(index, inst, "hc_store<" + t + ">(" + f + "(hc_load(" + Read(inst, 0) + ")))");
      return Status::Ok();
    };
    if (inst.operands.size() == 1) {
      switch (op) {
        case Opcode::kNegate:
          return call("hc_neg");
        case Opcode::kAbs:
          return call("hc_abs");
        case Opcode::kSign:
          return call("hc_sign");
        case Opcode::kNot:
          return call("hc_not");
        case Opcode::kExp:
          return math("std::exp");
        case Opcode::kExpm1:
          return math("std::expm1");
        case Opcode::kLog:
          return math("std::log");
        case Opcode::kLog1p:
          return math("std::log1p");
        case Opcode::kSqrt:
          return math("std::sqrt");
        case Opcode::kRsqrt:
          return math("1.0 / std::sqrt");
        case Opcode::kTanh:
          return math("std::tanh");
        case Opcode::kCos:
          return math("std::cos");
        case Opcode::kSin:
          return math("std::sin");
        case Opcode::kFloor:
          return math("std::floor");
        case Opcode::kCeil:
          return math("std::ceil");
        case Opcode::kRoundNearestAfz:
          return math("std::round");
        case Opcode::kRoundNearestEven:
          return math("std::nearbyint");
        case Opcode::kLogistic:
          if (!is_float) return Unsupported(inst, "logistic on integers");
          Elementwise(
              index, inst,
              "hc_store<" + t + ">(1.0 / (1.0 + std::exp(-hc_load(" + Read(inst, 0) + "))))");
          return Status::Ok();
        case Opcode::kIsFinite:
          Elementwise(index, inst, "std::isfinite(hc_load(" + Read(inst, 0) + "))");
          return Status::Ok();
        default:
          break;
      }
    } else {
      switch (op) {
        case Opcode::kAdd:
          return call("hc_add");
        case Opcode::kSubtract:
          return call("hc_sub");
        case Opcode::kMultiply:
          return call("hc_mul");
        case Opcode::kDivide:
          return call("hc_div");
        case Opcode::kRemainder:
          return call("hc_rem");
        case Opcode::kMaximum:
          return call("hc_max");
        case Opcode::kMinimum:
          return call("hc_min");
        case Opcode::kPower:
          return call("hc_pow");
        case Opcode::kShiftLeft:
        case Opcode::kShiftRightLogical:
        case Opcode::kShiftRightArithmetic:
          if (is_float || inst.shape.type == PrimitiveType::kPred) {
            return Unsupported(inst, "shifts of other than integers");
          }
          if (op == Opcode::kShiftLeft) return call("hc_shl");
          // The right shifts see a sub-byte value's own bits (its width as an argument).
          Elementwise(index, inst,
                      std::string(op == Opcode::kShiftRightLogical ? "hc_shrl<" : "hc_shra<") +
                          TypeAndWidth(inst.shape.type) + ">(" + Read(inst, 0) + ", " +
                          Read(inst, 1) + ")");
          return Status::Ok();
        case Opcode::kAnd:
        case Opcode::kOr:
        case Opcode::kXor: {
          const char* c = op == Opcode::kAnd ? "&" : op == Opcode::kOr ? "|" : "^";
          Elementwise(
              index, inst,
              "static_cast<" + t + ">(" + Read(inst, 0) + " " + c + " " + Read(inst, 1) + ")");
          return Status::Ok();
        }
        case Opcode::kAtan2:
          if (!is_float) return Unsupported(inst, "atan2 on integers");
          Elementwise(index, inst,
                      "hc_store<" + t + ">(std::atan2(hc_load(" + Read(inst, 0) + "), hc_load(" +
                          Read(inst, 1) + ")))");
          return Status::Ok();
        default:
          break;
      }
    }
    return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
  }

  // ---- Data movement -----------------------------------------------------------------------

  Result<std::vector<int64_t>> IntList(const Instruction& inst, const char* name) const {
    const hlo::Attribute* a = inst.FindAttribute(name);
    if (a == nullptr) return Error(Malformed(inst, std::string("no ") + name));
    return m_.IntList(*a);
  }

  // Start indices of a dynamic slice or update, clamped so the window stays inside the operand:
  // declares s0, s1, ... and returns the offset expression of the window's first element.
  std::string DynamicStarts(const Instruction& inst, size_t first,
                            const std::vector<int64_t>& window) {
    const auto& in = OperandShape(inst, 0).dims;
    const auto strides = hlo::RowMajorStrides(in);
    std::string offset = "0";
    for (size_t d = 0; d < in.size(); ++d) {
      const std::string s = "s" + std::to_string(d);
      Body() += "    const int64_t " + s +
                " = std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(" +
                Buffer(inst, first + d) + "[0]), 0), " +
                Int(std::max<int64_t>(0, in[d] - window[d])) + ");\n";
      offset += " + " + s + " * " + Int(strides[d]);
    }
    return offset;
  }

  // broadcast, transpose, slice, reverse, dynamic-slice: element d of the result reads the
  // operand at base + sum(d_k * coefficient_k).
  Status AffineCopy(int32_t index, const Instruction& inst) {
    const auto& od = inst.shape.dims;
    const auto& id = OperandShape(inst, 0).dims;
    std::vector<int64_t> coef;
    std::string base;
    const std::string out = Materialize(index, inst);
    Body() += "  {\n";
    if (inst.opcode.opcode == Opcode::kDynamicSlice) {
      base = DynamicStarts(inst, 1, od);
      coef = hlo::RowMajorStrides(id);
    } else {
      HLOCACHE_ASSIGN_OR_RETURN(AffineRead read, AffineReadOf(m_, inst, id));
      base = Int(read.base);
      coef = std::move(read.coefficients);
    }
    Body() += "    int64_t o = 0;\n";
    Body() += NestedLoops(od, out + "[o++] = " + Buffer(inst, 0) + "[" + Affine(base, coef) + "];");
    Body() += "  }\n";
    if (inst.shape.IsDynamic()) {
      HLOCACHE_ASSIGN_OR_RETURN(
          std::vector<interp::SizeSource> sources,
          interp::SizeSources(interp::ShapeContext(m_), inst, OperandShapes(inst)));
      ResultSizes(inst, sources, out);
    }
    return Status::Ok();
  }

  // hc_relayout's index arrays.
  static constexpr size_t kMaxRelayoutRank = 64;

  // A reshape from or to a dynamic shape: the operand's elements at their sizes, in row-major
  // order, relaid in the result's sizes (dynamic_dims.h's rule), zeros past the operand's end.
  Status DynamicReshape(int32_t index, const Instruction& inst) {
    const Shape& in = OperandShape(inst, 0);
    const Shape& r = inst.shape;
    if (in.dims.size() > kMaxRelayoutRank || r.dims.size() > kMaxRelayoutRank) {
      return Unsupported(inst, "a dynamic reshape of rank over 64");
    }
    const std::string out = Materialize(index, inst);
    const std::string in_rank = Int(static_cast<int64_t>(in.dims.size()));
    const std::string out_rank = Int(static_cast<int64_t>(r.dims.size()));
    Body() +=
        "  {\n" + DeclareDims("in", Buffer(inst, 0), in) + IntArray("out_bounds", r.dims) +
        BoolArray("in_dynamic", DynamicFlags(in)) + BoolArray("out_dynamic", DynamicFlags(r)) +
        "    int64_t dims[" + std::to_string(std::max<size_t>(r.dims.size(), 1)) + "];\n" +
        "    hc_reshaped_dims(in, in_dynamic, " + in_rank + ", out_bounds, out_dynamic, " +
        out_rank + ", dims);\n    hc_relayout(" + Buffer(inst, 0) + ", in_bounds, in, " + in_rank +
        ", " + out + ", out_bounds, dims, " + out_rank + ");\n" + SetDims(out, r, "dims") + "  }\n";
    return Status::Ok();
  }

  Status Pad(int32_t index, const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, interp::PaddingSpec(m_, inst));
    const auto& od = inst.shape.dims;
    const auto& id = OperandShape(inst, 0).dims;
    const auto os = hlo::RowMajorStrides(od);
    const std::string out = Materialize(index, inst);
    Body() += "  {\n    for (int64_t i = 0; i < " + Int(Count(inst.shape)) + "; ++i) " + out +
              "[i] = " + Buffer(inst, 1) + "[0];\n    int64_t o = 0;\n";
    // Each operand element lands at low + d * (interior + 1), when that is inside the result.
    std::string inside = "true", target = "0";
    for (size_t k = 0; k < id.size(); ++k) {
      const std::string q = "(" + Int(spec[3 * k]) + " + d" + std::to_string(k) + " * " +
                            Int(spec[3 * k + 2] + 1) + ")";
      inside += " && " + q + " >= 0 && " + q + " < " + Int(od[k]);
      target += " + " + q + " * " + Int(os[k]);
    }
    Body() += NestedLoops(id, "{ if (" + inside + ") " + out + "[" + target +
                                  "] = " + Buffer(inst, 0) + "[o]; ++o; }");
    Body() += "  }\n";
    return Status::Ok();
  }

  Status Concatenate(int32_t index, const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntList(inst, "dimensions"));
    const auto cd = static_cast<size_t>(dims[0]);
    const auto& od = inst.shape.dims;
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < cd; ++k) outer *= od[k];
    for (size_t k = cd + 1; k < od.size(); ++k) inner *= od[k];
    const std::string out = Materialize(index, inst);
    const std::string t = CType(inst.shape.type);
    Body() += "  for (int64_t o = 0; o < " + Int(outer) + "; ++o) {\n    " + t + "* dst = " + out +
              " + o * " + Int(od[cd] * inner) + ";\n";
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      const int64_t row = OperandShape(inst, k).dims[cd] * inner;
      if (row == 0) continue;
      Body() += "    std::memcpy(dst, " + Buffer(inst, k) + " + o * " + Int(row) + ", sizeof(" + t +
                ") * " + Int(row) + ");\n    dst += " + Int(row) + ";\n";
    }
    Body() += "  }\n";
    return Status::Ok();
  }

  Status DynamicUpdateSlice(int32_t index, const Instruction& inst) {
    const auto& ud = OperandShape(inst, 1).dims;
    const std::string out = Materialize(index, inst);
    Body() += "  std::memcpy(" + out + ", " + Buffer(inst, 0) + ", " + Int(Bytes(inst.shape)) +
              ");\n  {\n";
    const std::string base = DynamicStarts(inst, 2, ud);
    Body() += "    int64_t o = 0;\n";
    Body() += NestedLoops(ud, out + "[" + Affine(base, hlo::RowMajorStrides(inst.shape.dims)) +
                                  "] = " + Buffer(inst, 1) + "[o++];");
    Body() += "  }\n";
    return Status::Ok();
  }

  // ---- Reductions and contractions ------------------------------------------------------------

  // dot: the result's dimensions are the batch ones, lhs's free ones, then rhs's free ones.
  // Floats accumulate in double over the contracting dimensions in row-major order and are
  // rounded once, as the interpreter does; the blocked loops are the prelude's hc_dot.
  Status Dot(int32_t index, const Instruction& inst) {
    return EmitDot(index, inst, Leaves(inst.operands[0])[0], Leaves(inst.operands[1])[0]);
  }

  Status EmitDot(int32_t index, const Instruction& inst, const Leaf& lhs_leaf,
                 const Leaf& rhs_leaf) override {
    const Shape& lhs = *lhs_leaf.shape;
    const Shape& rhs = *rhs_leaf.shape;
    auto list = [&](const char* name) -> std::vector<int64_t> {
      const hlo::Attribute* a = inst.FindAttribute(name);
      if (a == nullptr) return {};
      auto v = m_.IntList(*a);
      return v ? *v : std::vector<int64_t>();
    };
    if (inst.shape.type == PrimitiveType::kPred) return Unsupported(inst, "dot of pred");
    const auto lb = list("lhs_batch_dims"), rb = list("rhs_batch_dims");
    const auto lc = list("lhs_contracting_dims"), rc = list("rhs_contracting_dims");
    const auto& ld = lhs.dims;
    const auto& rd = rhs.dims;
    std::vector<int64_t> lall = lb, rall = rb;
    lall.insert(lall.end(), lc.begin(), lc.end());
    rall.insert(rall.end(), rc.begin(), rc.end());
    const auto ls = hlo::RowMajorStrides(ld), rs = hlo::RowMajorStrides(rd);
    // Each group of dimensions (batch, free, contracting) as sizes and strides; the prelude's
    // hc_offsets turns each into the offsets of its indices, and hc_dot does the rest.
    struct Group {
      std::vector<int64_t> sizes, strides;
      int64_t count = 1;
      void Add(int64_t size, int64_t stride) {
        sizes.push_back(size);
        strides.push_back(stride);
        count *= size;
      }
    };
    Group l_batch, r_batch, l_free, r_free, l_con, r_con;
    for (size_t k = 0; k < lb.size(); ++k) {
      const auto l = static_cast<size_t>(lb[k]), r = static_cast<size_t>(rb[k]);
      l_batch.Add(ld[l], ls[l]);
      r_batch.Add(rd[r], rs[r]);
    }
    for (size_t k = 0; k < lc.size(); ++k) {
      const auto l = static_cast<size_t>(lc[k]), r = static_cast<size_t>(rc[k]);
      l_con.Add(ld[l], ls[l]);
      r_con.Add(rd[r], rs[r]);
    }
    for (size_t d = 0; d < ld.size(); ++d) {
      if (std::find(lall.begin(), lall.end(), static_cast<int64_t>(d)) == lall.end()) {
        l_free.Add(ld[d], ls[d]);
      }
    }
    for (size_t d = 0; d < rd.size(); ++d) {
      if (std::find(rall.begin(), rall.end(), static_cast<int64_t>(d)) == rall.end()) {
        r_free.Add(rd[d], rs[d]);
      }
    }
    const std::string out = Materialize(index, inst);
    Body() += "  {\n";
    auto offsets = [&](const char* name, const Group& g) {
      Body() += IntArray(std::string(name) + "_sizes", g.sizes);
      Body() += IntArray(std::string(name) + "_strides", g.strides);
      Body() += "    const auto " + std::string(name) + " = hc_offsets(" +
                std::to_string(g.sizes.size()) + ", " + name + "_sizes, " + name + "_strides);\n";
      Body() += "    if (!" + std::string(name) + ") return 1;  // Out of memory.\n";
    };
    offsets("lb", l_batch);
    offsets("lf", l_free);
    offsets("lc", l_con);
    offsets("rb", r_batch);
    offsets("rf", r_free);
    offsets("rc", r_con);
    Body() += "    if (!hc_dot(" + lhs_leaf.ptr + ", " + rhs_leaf.ptr + ", " + out + ", " +
              Int(l_batch.count) + ", " + Int(l_free.count) + ", " + Int(r_free.count) + ", " +
              Int(l_con.count) +
              ", lb.get(), lf.get(), lc.get(), rb.get(), rf.get(), rc.get())) {\n"
              "      return 1;  // Out of memory.\n    }\n  }\n";
    Body() += WrapSubBytes(out, inst.shape);
    return Status::Ok();
  }

  // reduce (variadic): for each result element, folds the reduced dimensions in row-major order
  // from the inits, as the interpreter does, with the reduction computation (parameters: the n
  // accumulators, then the n elements).
  Status Reduce(int32_t index, const Instruction& inst) {
    const size_t n = inst.operands.size() / 2;
    const Computation& f = m_.computations[static_cast<size_t>(inst.callees[0])];
    if (f.parameters.size() != 2 * n || f.root < 0) {
      return Malformed(inst, "the reduction computation does not take 2 scalars per operand");
    }
    for (size_t k = 0; k < 2 * n; ++k) {
      const Shape& p = Inst(f, f.parameters[k]).shape;
      if (!p.IsArray() || !p.dims.empty() || p.type != OperandShape(inst, k % n).type) {
        return Malformed(inst, "the reduction computation's parameter " + std::to_string(k) +
                                   " is not a scalar of its operand's type");
      }
    }
    const Shape& fr = Inst(f, f.root).shape;
    Shape want_root;
    for (size_t k = 0; k < n; ++k) {
      Shape s;
      s.type = OperandShape(inst, k).type;
      want_root.tuple_elements.push_back(s);
    }
    if (!SameValues(fr, n == 1 ? want_root.tuple_elements[0] : want_root)) {
      return Malformed(inst, "the reduction computation does not return one scalar per operand");
    }
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, IntList(inst, "dimensions"));
    const auto& id = OperandShape(inst, 0).dims;
    const auto is = hlo::RowMajorStrides(id);
    std::vector<bool> reduced(id.size(), false);
    for (int64_t x : d) reduced[static_cast<size_t>(x)] = true;
    std::vector<int64_t> kd, ks, rd, rs;
    for (size_t k = 0; k < id.size(); ++k) {
      (reduced[k] ? rd : kd).push_back(id[k]);
      (reduced[k] ? rs : ks).push_back(is[k]);
    }
    std::vector<const Shape*> leaves;
    AppendLeafShapes(inst.shape, leaves);
    std::vector<Leaf>& out = values_[static_cast<size_t>(index)];
    for (size_t k = 0; k < n; ++k) {
      const std::string name = Var(index) + "_" + std::to_string(k);
      Declare(name, *leaves[k]);
      out.push_back({name, leaves[k]});
    }
    // Results are computed a tile at a time: the reduced dimensions run in the outer loops, in
    // row-major order, and the tile's accumulators in the inner one. Each result still folds
    // its elements in the interpreter's order, but the tile's independent folds keep the CPU
    // busy (one fold is a chain of dependent adds), and vectorize when the results are
    // contiguous in the input. Results far apart in the input (a row reduction) take small
    // tiles: 64 rows a power of two apart share one set of the L1 cache and evict each other
    // (measured on f32[4096,4096] rows: 111 ms with tiles of 64, 19 ms with 8, 36 ms one row at
    // a time).
    const int64_t kept = Product(kd);
    // When the kept dimensions are laid out in order with nothing reduced between them, result
    // q starts at q * stride; otherwise each result's start is computed once, into base[].
    bool linear = true;
    for (size_t k = 0; k + 1 < kd.size(); ++k) linear = linear && ks[k] == ks[k + 1] * kd[k + 1];
    const int64_t stride = ks.empty() ? 0 : ks.back();
    const int64_t kTile = linear && stride == 1 ? 64 : 8;
    Body() += "  {\n";
    if (!linear) Body() += IntArray("kd", kd) + IntArray("ks", ks);
    Body() += "    for (int64_t t0 = 0; t0 < " + Int(kept) + "; t0 += " + Int(kTile) +
              ") {\n      const int64_t tn = " + Int(kept) + " - t0 < " + Int(kTile) + " ? " +
              Int(kept) + " - t0 : " + Int(kTile) + ";\n";
    std::string start = "(t0 + j) * " + Int(stride);
    if (!linear) {
      Body() += "      int64_t base[" + Int(kTile) +
                "];\n      for (int64_t j = 0; j < tn; ++j) {\n        base[j] = 0;\n" +
                Digits("t0 + j", "kd", kd.size(), {{"base[j]", "ks"}}) + "      }\n";
      start = "base[j]";
    }
    for (size_t k = 0; k < n; ++k) {
      const std::string t = CType(OperandShape(inst, k).type);
      Body() += "      " + t + " acc" + std::to_string(k) + "[" + Int(kTile) + "];\n";
      Body() += "      for (int64_t j = 0; j < tn; ++j) acc" + std::to_string(k) +
                "[j] = " + Buffer(inst, n + k) + "[0];\n";
    }
    // One step of every result of the tile: element i of each operand (loaded, or its fused
    // expression) folded into the accumulators.
    std::string step = "{\n";
    for (size_t k = 0; k < n; ++k) {
      step += "const " + std::string(CType(OperandShape(inst, k).type)) + " x" + std::to_string(k) +
              " = " + Read(inst, k) + "; ";
    }
    bool swapped = false;
    const char* helper = n == 1 ? OneOpCombiner(f, OperandShape(inst, 0).type, swapped) : nullptr;
    if (helper != nullptr) {
      const std::string t = CType(OperandShape(inst, 0).type);
      step += "acc0[j] = " + std::string(helper) + "<" + t + ">(" +
              (swapped ? "x0, acc0[j]" : "acc0[j], x0") + ");";
    } else {
      std::string args;
      for (size_t k = 0; k < n; ++k)
        args += (k ? ", " : "") + std::string("&acc") + std::to_string(k) + "[j]";
      for (size_t k = 0; k < n; ++k) args += ", &x" + std::to_string(k);
      for (size_t k = 0; k < n; ++k) {
        step +=
            std::string(CType(OperandShape(inst, k).type)) + " next" + std::to_string(k) + "[1]; ";
        args += ", next" + std::to_string(k);
      }
      step += "if (" + FunctionName(inst.callees[0]) + "(" + args + ") != 0) return 1; ";
      for (size_t k = 0; k < n; ++k) {
        step += "acc" + std::to_string(k) + "[j] = next" + std::to_string(k) + "[0]; ";
      }
    }
    step += "}";
    Body() += NestedLoops(rd,
                          "{\n          const int64_t roff = " + Affine("0", rs) +
                              ";\n          for (int64_t j = 0; j < tn; ++j) {\n" +
                              "            const int64_t i = " + start + " + roff;\n" +
                              "            " + step + "\n          }\n        }",
                          6);
    for (size_t k = 0; k < n; ++k) {
      Body() += "      for (int64_t j = 0; j < tn; ++j) " + out[k].ptr + "[t0 + j] = acc" +
                std::to_string(k) + "[j];\n";
    }
    Body() += "    }\n  }\n";
    return Status::Ok();
  }

  const hlo::Module& m_;
  const Computation* comp_ = nullptr;
  std::vector<std::vector<Leaf>> values_;          // Leaves of each materialized instruction.
  std::vector<std::optional<std::string>> fused_;  // Element-i expression of fused ones.
  std::vector<int> depth_;                         // Fused chain length ending here.
  std::vector<int> uses_;
  std::vector<bool> live_;  // Whether the root depends on the instruction (or it has effects).
  std::vector<std::pair<int32_t, size_t>> user_;  // The (last) user and its operand slot.
  int fresh_ = 0;                                 // For Fresh().
  const CpuLoweringOptions& options_;
  SegmentedFunction* function_ = nullptr;  // The function being written.
  std::vector<CodePiece> pieces_;          // The module's functions and large constants.
  std::string small_constants_;            // Defined in every unit.
};

}  // namespace

Result<std::vector<std::string>> LowerToCppUnits(const hlo::Module& module,
                                                 const CpuLoweringOptions& options) {
  return Lowering(module, options).Run();
}

Result<std::string> LowerToCpp(const hlo::Module& module) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> units, LowerToCppUnits(module));
  std::string out;
  for (size_t u = 0; u < units.size(); ++u) {
    if (units.size() > 1) out += "// ---- translation unit " + std::to_string(u) + "\n";
    out += units[u];
  }
  return out;
}

Result<EntryLeaves> EntryLeavesOf(const hlo::Module& module) {
  if (module.entry < 0) return Error(InvalidArgument(module.filename() + ": no entry computation"));
  const Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  std::vector<const Shape*> parameters, results;
  for (int32_t p : entry.parameters) {
    if (p < 0) return Error(InvalidArgument(module.filename() + ": a missing parameter"));
    AppendLeafShapes(entry.instructions[static_cast<size_t>(p)].shape, parameters);
  }
  if (entry.root < 0) return Error(InvalidArgument(module.filename() + ": no root"));
  AppendLeafShapes(entry.instructions[static_cast<size_t>(entry.root)].shape, results);
  EntryLeaves leaves;
  for (const Shape* s : parameters) leaves.parameters.push_back(*s);
  for (const Shape* s : results) leaves.results.push_back(*s);
  return leaves;
}

}  // namespace hlocache::compiler
