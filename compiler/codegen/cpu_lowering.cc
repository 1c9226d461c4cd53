// The lowering driver: each computation in order, operand fusion, values materialized as
// buffers, and the dispatch of each instruction to its op.
#include "compiler/codegen/cpu_lowering.h"

#include <charconv>

#include "compiler/semantics/numerics.h"

namespace hlocache::compiler::lowering_internal {

const std::vector<Leaf>& Lowering::Leaves(int32_t i) const {
  return values_[static_cast<size_t>(i)];
}

const std::vector<Leaf>& Lowering::MaterializeLeaves(int32_t index, const Instruction& inst) {
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

void Lowering::Bind(int32_t index, std::vector<Leaf> leaves) {
  values_[static_cast<size_t>(index)] = std::move(leaves);
}

std::string Lowering::Fresh(std::string_view prefix) {
  return std::string(prefix) + "_" + std::to_string(fresh_++);
}

namespace {

// Whether an instruction's code does more than name it (a comment line: fused instructions
// write only that).
bool WritesCode(std::string_view code) {
  for (size_t at = 0; at < code.size();) {
    size_t end = code.find('\n', at);
    if (end == std::string_view::npos) end = code.size();
    const std::string_view line = code.substr(at, end - at);
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && !line.substr(first).starts_with("//")) return true;
    at = end + 1;
  }
  return false;
}

}  // namespace

// The module's translation units (cpu_units.h): each starts with the prelude and every
// declaration; the functions and large constants are spread over them.
Result<std::vector<std::string>> Lowering::Run() {
  if (m_.entry < 0) return Error(InvalidArgument(m_.filename() + ": no entry computation"));
  std::vector<int> state(m_.computations.size(), 0);
  HLOCACHE_RETURN_IF_ERROR(Reach(m_.entry, state));
  MarkLoopComputations(state);
  pieces_.clear();
  pieces_.push_back({"", EntryPoint()});
  for (size_t c = 0; c < m_.computations.size(); ++c) {
    if (state[c] != 2) continue;
    HLOCACHE_RETURN_IF_ERROR(LowerComputation(static_cast<int32_t>(c)));
  }
  std::string shared = CpuUnitPrelude();
  for (const CodePiece& p : pieces_) shared += p.declaration;
  shared += small_constants_ + "\n";
  return PackUnits(shared, pieces_, options_);
}

// The entry point: leaves of the parameters in, leaves of the result out.
std::string Lowering::EntryPoint() const {
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
  // A module whose f32 dots may call BLAS asks the loader for it (prelude: hc_sgemm).
  std::string blas;
  if (CallsBlas()) {
    blas =
        "extern \"C\" __attribute__((visibility(\"default\"))) const hlocache_rt::hc_blas*\n"
        "    hlocache_blas_runtime = nullptr;\n\n";
  }
  return blas +
         "extern \"C\" __attribute__((visibility(\"default\"))) int hlocache_entry_host(\n"
         "    const void* const* params, void* const* results,\n"
         "    [[maybe_unused]] const hlocache_rt::hc_host* host) {\n" +
         body +
         "}\n\n"
         "extern \"C\" __attribute__((visibility(\"default\"))) int hlocache_entry(\n"
         "    const void* const* params, void* const* results) {\n"
         "  return hlocache_entry_host(params, results, nullptr);\n}\n\n";
}

// Whether a dot or convolution of the module may call BLAS: one of f32 operands and result,
// where schema/numerics.tsv lets its op reassociate in f32 (BLAS sums in float, in an order of
// its own).
bool Lowering::CallsBlas() const {
  for (const Computation& c : m_.computations) {
    for (const Instruction& inst : c.instructions) {
      const Opcode op = inst.opcode.opcode;
      if ((op != Opcode::kDot && op != Opcode::kConvolution) || inst.operands.size() != 2 ||
          inst.shape.type != PrimitiveType::kF32 ||
          !interp::Reassociates(op, PrimitiveType::kF32)) {
        continue;
      }
      bool f32 = true;
      for (int32_t o : inst.operands) {
        f32 = f32 && c.instructions[static_cast<size_t>(o)].shape.type == PrimitiveType::kF32;
      }
      if (f32) return true;
    }
  }
  return false;
}

// Whether an instruction of the module transfers with the host.
bool Lowering::HasHostTransfers() const {
  for (const Computation& c : m_.computations) {
    for (const Instruction& inst : c.instructions) {
      if (hlo::IsHostTransfer(inst.opcode.opcode)) return true;
    }
  }
  return false;
}

Status Lowering::Unsupported(const Instruction& inst, const std::string& what) const {
  return interp::UnsupportedInstruction(m_, inst, "the CPU code generator", what);
}

Status Lowering::Malformed(const Instruction& inst, const std::string& what) const {
  return interp::MalformedInstruction(m_, inst, what);
}

// Marks the computations the entry reaches (2 = reached and finished); a cycle is refused.
Status Lowering::Reach(int32_t c, std::vector<int>& state) {
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

Status Lowering::CheckLeaf(const Instruction& inst, const Shape& s) const {
  if (s.IsTuple()) return Status::Ok();
  if (CType(s.type) == nullptr) {
    return Unsupported(inst, "the element type " + hlo::CanonicalShapeText(s));
  }
  if (!s.BoundElementCount()) {
    return Unsupported(inst, s.IsDynamic() ? "unbounded dynamic dimensions" : "this shape");
  }
  return Status::Ok();
}

Status Lowering::CheckShape(const Instruction& inst, const Shape& s) const {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_elements) HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, e));
    return Status::Ok();
  }
  return CheckLeaf(inst, s);
}

// ---- One computation as one static function -------------------------------------------

Status Lowering::LowerComputation(int32_t c) {
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

  SegmentedFunction function(FunctionName(c), signature, std::move(params), options_.segment_bytes);
  function_ = &function;
  PlanResultBuffers(c, function);
  std::vector<bool> invariant;
  const std::vector<int32_t> hoisted = PlanHoisting(c, invariant);
  if (!hoisted.empty()) HLOCACHE_RETURN_IF_ERROR(LowerInvariants(c, hoisted, invariant, function));
  pending_rows_.reset();
  defer_rows_ = true;
  for (size_t i = 0; i < comp.instructions.size(); ++i) {
    if (!live_[i] || invariant[i]) continue;
    const Status lowered = Lower(static_cast<int32_t>(i));
    if (!lowered.ok()) {
      defer_rows_ = false;
      pending_rows_.reset();
      return lowered;
    }
    // A reduction waiting for its consumer runs before any other instruction's code.
    if (pending_rows_ && pending_rows_->index != static_cast<int32_t>(i) && WritesCode(Body())) {
      FlushPendingRows();
    }
    function.EndInstruction();
  }
  defer_rows_ = false;
  FlushPendingRows();
  function.EndInstruction();
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
    const auto in_place = result_buffers_.find(out[j].ptr);
    if (in_place != result_buffers_.end() && in_place->second == r) continue;  // Written there.
    epilogue += from_parameter ? "  if (" + r + " != " + out[j].ptr + ") " + copy : "  " + copy;
  }
  result_buffers_.clear();
  entry_function_ = nullptr;
  for (CodePiece& piece : function.Finish(epilogue)) pieces_.push_back(std::move(piece));
  return Status::Ok();
}

bool Lowering::TouchesDynamicShapes(const Instruction& inst) const {
  if (hlo::HasDynamicLeaf(inst.shape)) return true;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    if (hlo::HasDynamicLeaf(OperandShape(inst, k))) return true;
  }
  return false;
}

// The ops of dynamic shapes are those of interp/dynamic_shapes.h.
Status Lowering::CheckDynamicShapes(const Instruction& inst) const {
  const std::string why = interp::WhyNotDynamic(inst, OperandShapes(inst));
  return why.empty() ? Status::Ok() : Unsupported(inst, why);
}

// Declares a fresh buffer for an array of shape `s` named `name`, owned by the function.
void Lowering::Declare(const std::string& name, const Shape& s) {
  // A dynamic shape's buffer has room for its sizes after the elements (cpu_source.h).
  const int64_t width = hlo::BufferElementBytes(s.type);
  const int64_t count = Count(s) + (Bytes(s) - DataBytes(s) + width - 1) / width;
  const auto result = result_buffers_.find(name);
  function_->Declare(
      {name, CType(s.type), std::max<int64_t>(count, 1), width, Bytes(s) > kStackBufferBytes,
       result != result_buffers_.end() && function_ == entry_function_ ? result->second
                                                                       : std::string()});
}

// ---- Fusion of elementwise chains ---------------------------------------------------------
//
// An elementwise op computes element i from element i of its operands. When such an op has
// exactly one use, and that use reads it at the same index i, its value is never stored: its
// expression is substituted into its user's loop. Chains of them become one loop.

bool Lowering::IsElementwise(const Instruction& inst) {
  return IsFusibleElementwise(inst, IsElementwiseExtendedCpuOp);
}

// Whether `user` reads its operand `k` at the index of the element it computes.
bool Lowering::ReadsAtIndex(const Instruction& user, size_t k) const {
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
bool Lowering::IsScalarBroadcast(const Instruction& inst) const {
  return inst.opcode.opcode == Opcode::kBroadcast && inst.operands.size() == 1 &&
         Count(OperandShape(inst, 0)) == 1 && !OperandShape(inst, 0).IsDynamic() &&
         inst.shape.IsArray();
}

bool Lowering::IsIndexedBroadcast(const Instruction& inst) const {
  return inst.opcode.opcode == Opcode::kBroadcast && inst.operands.size() == 1 &&
         OperandShape(inst, 0).IsArray() && !OperandShape(inst, 0).IsDynamic() &&
         inst.shape.IsArray() && !inst.shape.IsDynamic();
}

Result<std::string> Lowering::BroadcastIndex(const Instruction& inst) const {
  const auto& od = inst.shape.dims;
  HLOCACHE_ASSIGN_OR_RETURN(AffineRead read, AffineReadOf(m_, inst, OperandShape(inst, 0).dims));
  // Runs of result dimensions (size-1 ones dropped) that the operand reads as one: adjacent
  // dimensions a, b with coefficient(a) == coefficient(b) * extent(b), both mapped or both not.
  struct Run {
    int64_t extent, stride, coefficient;  // Stride of the run's last dimension in the result.
  };
  std::vector<Run> runs;
  const std::vector<int64_t> strides = hlo::RowMajorStrides(od);
  for (size_t k = 0; k < od.size(); ++k) {
    if (od[k] == 1) continue;
    const int64_t c = read.coefficients[k];
    if (!runs.empty() && runs.back().coefficient == c * od[k] &&
        runs.back().stride == strides[k] * od[k]) {
      runs.back() = {runs.back().extent * od[k], strides[k], c};
      continue;
    }
    runs.push_back({od[k], strides[k], c});
  }
  std::string index = read.base != 0 ? Int(read.base) : "";
  const int64_t count = Count(inst.shape);
  for (const Run& r : runs) {
    if (r.coefficient == 0) continue;
    std::string digit = r.stride == 1 ? "i" : "(i / " + Int(r.stride) + ")";
    if (r.extent * r.stride < count) digit = "(" + digit + " % " + Int(r.extent) + ")";
    index += (index.empty() ? "" : " + ") + digit +
             (r.coefficient == 1 ? "" : " * " + Int(r.coefficient));
  }
  return index.empty() ? "0" : index;
}

bool Lowering::Fusible(int32_t i) const {
  const Instruction& inst = Inst(*comp_, i);
  if (!(IsElementwise(inst) || IsIndexedBroadcast(inst)) || uses_[static_cast<size_t>(i)] != 1 ||
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
std::string Lowering::Read(const Instruction& inst, size_t k) const {
  const auto o = static_cast<size_t>(inst.operands[k]);
  if (fused_[o]) return "(" + *fused_[o] + ")";
  return values_[o][0].ptr + "[i]";
}

// Operand k at element i, or its one element when it is a scalar next to a bigger result.
std::string Lowering::ReadOrScalar(const Instruction& inst, size_t k) const {
  if (Count(OperandShape(inst, k)) == 1 && Count(inst.shape) != 1) return Buffer(inst, k) + "[0]";
  return Read(inst, k);
}

// Defines instruction `index` elementwise by `expr` (in terms of i): fused into its user, or
// one loop writing its buffer.
void Lowering::Elementwise(int32_t index, const Instruction& inst, const std::string& unwrapped) {
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
  const int64_t count = Count(inst.shape);
  const bool split = count >= kParallelElements;
  std::string loop;
  if (auto by_rows = ByRows(inst, expr)) {
    const int64_t width = inst.shape.dims.back();
    // A row reduction this loop reads at r, computed row by row first (PendingRows).
    const std::string first = ClaimPendingRows(count / width, *by_rows).value_or("");
    loop = "  for (int64_t r = " + std::string(split ? "lo" : "0") + "; r < " +
           (split ? "hi" : Int(count / width)) + "; ++r) {\n" + first + Simd(*by_rows) +
           "    for (int64_t i = r * " + Int(width) + "; i < (r + 1) * " + Int(width) + "; ++i) " +
           Var(index) + "[i] = " + *by_rows + ";\n  }\n";
    if (split) SplitLoop(count / width, std::max<int64_t>(1, kParallelGrain / width), loop);
  } else {
    loop = Simd(expr) + "  for (int64_t i = " + (split ? "lo" : "0") + "; i < " +
           (split ? "hi" : Int(count)) + "; ++i) " + Var(index) + "[i] = " + expr + ";\n";
    // Split across threads: each element is computed as on one.
    if (split) SplitLoop(count, kParallelGrain, loop);
  }
  if (!split) Body() += loop;
  if (inst.shape.IsDynamic()) {
    ResultSizes(inst, interp::ElementwiseSizeSources(inst, OperandShapes(inst)), Var(index));
  }
}

// A loop is vectorized whatever the cost model at -O2 says (it keeps loops of an unknown trip
// count scalar) when it calls the prelude's vector math, or when it reads every operand at i or
// at an index fixed for the loop: the elements are independent, and the loop writes a buffer
// of its own, which none of its operands overlaps. A loop that reads at a computed index
// (a transposition, a broadcast) is left to the cost model: gathers may cost more than they save.
std::string Lowering::Simd(const std::string& expr) {
  const bool vector_math = expr.find("hc_vm_") != std::string::npos;
  const bool contiguous =
      expr.find("(i / ") == std::string::npos && expr.find("(i % ") == std::string::npos;
  return vector_math || contiguous ? "  #pragma omp simd\n" : "";
}

// A loop whose elements read a broadcast along leading dimensions (a row's max or sum, in a
// softmax or a layer norm) reads it at (i / S), S a multiple of the row's length W, and one
// along the row (a layer norm's scale) at (i % W): one load a row, or a contiguous one, but a
// gather of a computed index a lane to a vectorizer, which then leaves the loop scalar. Such a
// loop runs row by row instead, r the row: i / S is r / (S / W) and i % W is i - r * W for every
// i of row r. Returns the expression so rewritten; nullopt where no index of these forms is
// found. The text replaced is the one BroadcastIndex writes; an index of another form stays as
// it was, and is still correct, since i is still the element's index.
std::optional<std::string> Lowering::ByRows(const Instruction& inst,
                                            const std::string& expr) const {
  const auto& dims = inst.shape.dims;
  if (dims.size() < 2 || dims.back() < 16 || inst.shape.IsDynamic()) return std::nullopt;
  const int64_t width = dims.back();
  std::string out;
  bool replaced = false;
  for (size_t at = 0;;) {
    const size_t div = expr.find("(i / ", at), mod = expr.find("(i % ", at);
    const size_t found = std::min(div, mod);
    out += expr.substr(at, found == std::string::npos ? std::string::npos : found - at);
    if (found == std::string::npos) break;
    const size_t end = expr.find(')', found);
    if (end == std::string::npos) return std::nullopt;  // Not an index BroadcastIndex wrote.
    const std::string text = expr.substr(found, end + 1 - found);
    const std::string number = expr.substr(found + 5, end - found - 5);
    int64_t n = 0;  // The divisor, where it is a literal BroadcastIndex wrote ("4096LL").
    if (number.ends_with("LL")) {
      const auto [end_of_number, error] =
          std::from_chars(number.data(), number.data() + number.size() - 2, n);
      if (error != std::errc() || end_of_number != number.data() + number.size() - 2) n = 0;
    }
    if (found == div && n > 0 && n % width == 0) {
      out += n == width ? "r" : "(r / " + Int(n / width) + ")";
      replaced = true;
    } else if (found == mod && n == width) {
      out += "(i - r * " + Int(width) + ")";
      replaced = true;
    } else {
      out += text;
    }
    at = end + 1;
  }
  if (!replaced) return std::nullopt;
  return out;
}

// The entry's results are buffers its caller provides, overlapping nothing (cpu_codegen.h): the
// buffers of the values the root hands on whole (its own, or its tuple's operands used nowhere
// else) are those results, written in place instead of copied at the end. Other computations'
// callers may pass a parameter's buffer as a result (a loop's state), so they keep the copy.
void Lowering::PlanResultBuffers(int32_t c, SegmentedFunction& function) {
  result_buffers_.clear();
  entry_function_ = nullptr;
  if (c != m_.entry) return;
  entry_function_ = &function;
  const Computation& comp = m_.computations[static_cast<size_t>(c)];
  const Instruction& root = Inst(comp, comp.root);
  // Leaves of instruction x's value, results first_result on: the names its buffers have
  // (MaterializeLeaves'; a reduce's and other multi-result ops' v<x>_<j> even for one leaf).
  // No op names scratch buffers this way (those are Fresh's).
  auto alias = [&](int32_t x, size_t first_result) {
    const Instruction& inst = Inst(comp, x);
    if (inst.opcode.opcode == Opcode::kParameter) return;
    std::vector<const Shape*> leaves;
    AppendLeafShapes(inst.shape, leaves);
    for (size_t j = 0; j < leaves.size(); ++j) {
      if (leaves[j]->IsDynamic()) continue;
      const std::string result = "r" + std::to_string(first_result + j);
      result_buffers_[Var(x) + "_" + std::to_string(j)] = result;
      if (leaves.size() == 1 && inst.shape.IsArray()) result_buffers_[Var(x)] = result;
    }
  };
  if (root.opcode.opcode != Opcode::kTuple) {
    alias(comp.root, 0);
    return;
  }
  size_t first = 0;
  for (int32_t x : root.operands) {
    // Used by the root tuple alone, once.
    if (uses_[static_cast<size_t>(x)] == 1) alias(x, first);
    std::vector<const Shape*> leaves;
    AppendLeafShapes(Inst(comp, x).shape, leaves);
    first += leaves.size();
  }
}

void Lowering::SplitLoop(int64_t count, int64_t grain, const std::string& loop) {
  // The loop's pointers, in order of first use, become its arguments hc_a0, hc_a1, ...: loops
  // that differ only in the buffers they touch (every layer of a model) share one function.
  std::map<std::string, std::string> names;
  std::string unpack;
  std::string args;
  for (const std::string& name : Identifiers(loop)) {
    std::string type;
    bool unaliased = true;
    if (const auto pointer = function_->Pointer(name)) {
      type = pointer->type;
      unaliased = pointer->unaliased;
    } else if (const auto constant = constant_types_.find(name);
               constant != constant_types_.end()) {
      type = constant->second;
    } else {
      continue;  // A local of the loop, or the prelude's.
    }
    const std::string arg = "hc_a" + std::to_string(names.size());
    unpack += "  " + type + (unaliased ? " const __restrict " : " const ") + arg +
              " = static_cast<" + type + ">(hc_in[" + std::to_string(names.size()) + "]);\n";
    args += std::string(args.empty() ? "" : ", ") + "hc_arg(" + name + ")";
    names[name] = arg;
  }
  const std::string body = "(void* const* hc_in, int64_t lo, int64_t hi) {\n" + unpack +
                           RenameNames(loop, names) + "  return 0;\n}\n\n";
  auto [it, added] =
      split_loops_.try_emplace(body, "hc_loop" + std::to_string(split_loops_.size()));
  if (added) {
    pieces_.push_back(
        {"int " + it->second + "(void* const*, int64_t, int64_t);\n", "int " + it->second + body});
  }
  Body() += "  {\n    void* const hc_args[] = {" + (args.empty() ? "nullptr" : args) +
            "};\n    if (hc_parallel_run(" + Int(count) + ", " + Int(grain) + ", " + it->second +
            ", hc_args) != 0) return 1;\n  }\n";
}

std::vector<const Shape*> Lowering::OperandShapes(const Instruction& inst) const {
  std::vector<const Shape*> operands;
  for (size_t k = 0; k < inst.operands.size(); ++k) operands.push_back(&OperandShape(inst, k));
  return operands;
}

// ---- Instructions --------------------------------------------------------------------------

Status Lowering::Lower(int32_t index) {
  const Instruction& inst = Inst(*comp_, index);
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kParameter) return Status::Ok();  // Bound in the signature.
  if (inst.opcode.phase != hlo::AsyncPhase::kNone) return Unsupported(inst, "asynchronous ops");
  if (TouchesDynamicShapes(inst)) HLOCACHE_RETURN_IF_ERROR(CheckDynamicShapes(inst));
  if (IsExtendedCpuOp(op)) return LowerExtended(index, inst);
  if (!interp::IsCoreOp(op)) return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
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
      if (op == Opcode::kReshape && (inst.shape.IsDynamic() || OperandShape(inst, 0).IsDynamic())) {
        return DynamicReshape(index, inst);
      }
      Elementwise(index, inst, Read(inst, 0));
      return Status::Ok();
    case Opcode::kConvert: {
      // A sub-byte target saturates (from floats) at its own width's bounds.
      const std::string width = IsSubByteInteger(inst.shape.type)
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
      if (IsIndexedBroadcast(inst) && Fusible(index)) {
        HLOCACHE_ASSIGN_OR_RETURN(std::string at, BroadcastIndex(inst));
        Elementwise(index, inst, Buffer(inst, 0) + "[" + at + "]");
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
Status Lowering::LowerExtended(int32_t index, const Instruction& inst) {
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

Status Lowering::Tuple(int32_t index, const Instruction& inst) {
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

Status Lowering::GetTupleElement(int32_t index, const Instruction& inst) {
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

Status Lowering::Call(int32_t index, const Instruction& inst) {
  if (inst.callees.size() != 1) return Unsupported(inst, "a call without one computation");
  const int32_t callee = inst.callees[0];
  const Computation& f = m_.computations[static_cast<size_t>(callee)];
  if (f.parameters.size() != inst.operands.size()) {
    return Malformed(inst, "the operands do not match the called computation's parameters");
  }
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    if (f.parameters[k] < 0 || !SameValues(Inst(f, f.parameters[k]).shape, OperandShape(inst, k))) {
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

// The integer list attribute `name`.
Result<std::vector<int64_t>> Lowering::IntList(const Instruction& inst, const char* name) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return Error(Malformed(inst, std::string("no ") + name));
  return m_.IntList(*a);
}

}  // namespace hlocache::compiler::lowering_internal
