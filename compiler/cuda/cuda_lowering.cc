// The CUDA lowering driver: computations inlined into kernels, elementwise chains fused, values
// materialized as device buffers, and the dispatch of each instruction to its op.
#include "compiler/cuda/cuda_lowering.h"

namespace hlocache::compiler::cuda_lowering_internal {

Result<CudaProgram> CudaLowering::Run() {
  if (m_.entry < 0) return Error(InvalidArgument(m_.filename() + ": no entry computation"));
  const Computation& entry = m_.computations[static_cast<size_t>(m_.entry)];
  std::vector<Value> args;
  for (int32_t p : entry.parameters) {
    if (p < 0) return Error(InvalidArgument(m_.filename() + ": a missing parameter"));
    const Instruction& param = entry.instructions[static_cast<size_t>(p)];
    HLOCACHE_RETURN_IF_ERROR(CheckShape(param, param.shape));
    std::vector<const Shape*> leaves;
    hlo::AppendLeafShapes(param.shape, leaves);
    Value v;
    for (const Shape* s : leaves) {
      Val leaf;
      leaf.shape = s;
      leaf.buffer = NewBuffer(*s);
      plan_.parameters.push_back(leaf.buffer);
      v.push_back(std::move(leaf));
    }
    args.push_back(std::move(v));
  }
  HLOCACHE_ASSIGN_OR_RETURN(Value root, Inline(m_.entry, std::move(args), 0));
  // Each result gets a buffer of its own: not a parameter's, not another result's.
  std::set<int64_t> taken(plan_.parameters.begin(), plan_.parameters.end());
  for (Val& v : root) {
    HLOCACHE_RETURN_IF_ERROR(Materialize(v, /*constants=*/true));
    if (taken.count(v.buffer) != 0) {
      const int64_t copy = NewBuffer(*v.shape);
      CudaStep step;
      step.from = v.buffer;
      step.to = copy;
      step.bytes = ByteCount(*v.shape);
      if (step.bytes > 0) plan_.steps.push_back(step);
      v.buffer = copy;
    }
    taken.insert(v.buffer);
    plan_.results.push_back(v.buffer);
  }
  CudaProgram out;
  out.source = CudaUnitPrelude() + constants_ + "\n" + functions_ + "\n" + kernels_;
  out.plan = std::move(plan_);
  return out;
}

// ---- Errors and checks -------------------------------------------------------------------

Status CudaLowering::Unsupported(const Instruction& inst, const std::string& what) const {
  return interp::UnsupportedInstruction(m_, inst, "the CUDA code generator", what);
}

Status CudaLowering::Malformed(const Instruction& inst, const std::string& why) const {
  return interp::MalformedInstruction(m_, inst, why);
}

Status CudaLowering::CheckShape(const Instruction& inst, const Shape& s) const {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple_elements) HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, e));
    return Status::Ok();
  }
  if (DeviceType(s.type) == nullptr) {
    return Unsupported(inst, "the element type " + hlo::CanonicalShapeText(s));
  }
  if (!s.ElementCount()) return Unsupported(inst, "dynamic dimensions");
  return Status::Ok();
}

// ---- Buffers and kernels -----------------------------------------------------------------

int64_t CudaLowering::NewBuffer(const Shape& s) {
  plan_.buffer_bytes.push_back(std::max<int64_t>(ByteCount(s), 1));
  buffer_types_.emplace_back(CType(s.type));
  return static_cast<int64_t>(plan_.buffer_bytes.size()) - 1;
}

// Element i of a leaf, and its element 0.
Expr CudaLowering::Read(const Val& v) {
  if (v.fused) return {"(" + v.fused->code + ")", v.fused->buffers, v.fused->depth};
  return At(v, "i");
}

Expr CudaLowering::At(const Val& v, const std::string& index) {
  if (!v.constant.empty()) return {v.constant + "[" + index + "]", {}, 0};
  return {B(v.buffer) + "[" + index + "]", {v.buffer}, 0};
}

// Puts a fused leaf (and, with `constants`, a constant) into a buffer of its own.
Status CudaLowering::Materialize(Val& v, bool constants) {
  if (!v.fused && (v.constant.empty() || !constants)) return Status::Ok();
  const Expr e = Read(v);
  const int64_t out = NewBuffer(*v.shape);
  Launch({out}, e.buffers, ElementCount(*v.shape), "    " + B(out) + "[i] = " + e.code + ";\n");
  v.fused.reset();
  v.constant.clear();
  v.buffer = out;
  return Status::Ok();
}

// A constant as bytes in the cubin's global memory.
Result<std::string> CudaLowering::Constant(const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(interp::Literal value, interp::ConstantValue(m_, inst));
  if (value.is_tuple()) return Error(Unsupported(inst, "tuple constants"));
  const std::string bytes = interp::ToBytes(value);
  const std::string name = "c" + std::to_string(constant_count_++);
  constants_ += "__device__ __align__(16) const unsigned char " + name + "[] =\n    \"";
  char esc[8];
  for (size_t k = 0; k < bytes.size(); ++k) {
    if (k != 0 && k % 32 == 0) constants_ += "\"\n    \"";
    std::snprintf(esc, sizeof esc, "\\%03o", static_cast<unsigned char>(bytes[k]));
    constants_ += esc;
  }
  constants_ += "\";\n";
  return "((const " + std::string(CType(inst.shape.type)) + "*)" + name + ")";
}

// ---- Computations, inlined ---------------------------------------------------------------

Result<Value> CudaLowering::Inline(int32_t c, std::vector<Value> args, int depth) {
  if (c < 0 || static_cast<size_t>(c) >= m_.computations.size()) {
    return Error(InvalidArgument(m_.filename() + ": a call to a computation that does not exist"));
  }
  const Computation& comp = m_.computations[static_cast<size_t>(c)];
  if (depth > kMaxInlineDepth || std::find(active_.begin(), active_.end(), c) != active_.end()) {
    return Error(InvalidArgument(m_.filename() + ": computation '" + std::string(comp.name) +
                                 "' calls itself, or calls nest too deep"));
  }
  if (comp.root < 0)
    return Error(InvalidArgument(m_.filename() + ": a computation without a root"));
  if (args.size() != comp.parameters.size()) {
    return Error(InvalidArgument(m_.filename() + ": computation '" + std::string(comp.name) +
                                 "' called with the wrong number of arguments"));
  }
  active_.push_back(c);
  Frame f;
  f.comp = &comp;
  const size_t n = comp.instructions.size();
  f.values.assign(n, {});
  f.uses.assign(n, 0);
  f.user.assign(n, {-1, 0});
  f.live.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t o : comp.instructions[i].operands) {
      if (o < 0 || static_cast<size_t>(o) >= i) {
        return Error(Unsupported(comp.instructions[i], "operands defined after their use"));
      }
    }
  }
  // What the root does not use is not lowered, except the ops with effects outside the
  // executable: those must run, or the module is refused (as the CPU target does).
  f.live[static_cast<size_t>(comp.root)] = true;
  for (size_t i = n; i-- > 0;) {
    if (!f.live[i] && !hlo::HasEffects(comp.instructions[i].opcode.opcode)) continue;
    f.live[i] = true;
    for (int32_t o : comp.instructions[i].operands) f.live[static_cast<size_t>(o)] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!f.live[i]) continue;
    const Instruction& inst = comp.instructions[i];
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      const auto o = static_cast<size_t>(inst.operands[k]);
      ++f.uses[o];
      f.user[o] = {static_cast<int32_t>(i), k};
    }
  }
  ++f.uses[static_cast<size_t>(comp.root)];
  for (size_t p = 0; p < comp.parameters.size(); ++p) {
    const int32_t at = comp.parameters[p];
    if (at < 0) return Error(InvalidArgument(m_.filename() + ": a missing parameter"));
    f.values[static_cast<size_t>(at)] = std::move(args[p]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (!f.live[i]) continue;
    HLOCACHE_RETURN_IF_ERROR(Lower(f, static_cast<int32_t>(i), depth));
  }
  active_.pop_back();
  Value root = f.values[static_cast<size_t>(comp.root)];
  std::vector<const Shape*> leaves;
  hlo::AppendLeafShapes(comp.instructions[static_cast<size_t>(comp.root)].shape, leaves);
  if (root.size() != leaves.size()) {
    return Error(Malformed(comp.instructions[static_cast<size_t>(comp.root)],
                           "the root's value does not have the root's shape"));
  }
  return root;
}

const Instruction& CudaLowering::Inst(const Frame& f, int32_t i) {
  return f.comp->instructions[static_cast<size_t>(i)];
}

const Shape& CudaLowering::OperandShape(const Frame& f, const Instruction& inst, size_t k) {
  return Inst(f, inst.operands[k]).shape;
}

Val& CudaLowering::Operand(Frame& f, const Instruction& inst, size_t k) {
  return f.values[static_cast<size_t>(inst.operands[k])][0];
}

// ---- Fusion --------------------------------------------------------------------------------

bool CudaLowering::IsElementwise(const Instruction& inst) { return IsFusibleElementwise(inst); }

bool CudaLowering::IsScalarBroadcast(const Frame& f, const Instruction& inst) {
  return inst.opcode.opcode == Opcode::kBroadcast && inst.operands.size() == 1 &&
         inst.shape.IsArray() && OperandShape(f, inst, 0).IsArray() &&
         ElementCount(OperandShape(f, inst, 0)) == 1;
}

bool CudaLowering::ReadsAtIndex(const Frame& f, const Instruction& user, size_t k) {
  if (user.opcode.opcode == Opcode::kReduce) return k < user.operands.size() / 2;
  if (!IsElementwise(user)) return false;
  const int64_t n = ElementCount(user.shape);
  if (user.opcode.opcode == Opcode::kSelect && k == 0) {
    return ElementCount(OperandShape(f, user, 0)) == n;
  }
  if (user.opcode.opcode == Opcode::kClamp && k != 1) {
    return ElementCount(OperandShape(f, user, k)) == n;
  }
  return true;
}

bool CudaLowering::Fusible(const Frame& f, int32_t i) {
  const Instruction& inst = Inst(f, i);
  if (!(IsElementwise(inst) || IsScalarBroadcast(f, inst)) || f.uses[static_cast<size_t>(i)] != 1 ||
      i == f.comp->root) {
    return false;
  }
  const auto [user, slot] = f.user[static_cast<size_t>(i)];
  if (user < 0) return false;
  const Instruction& u = Inst(f, user);
  return ReadsAtIndex(f, u, slot) &&
         (u.opcode.opcode == Opcode::kReduce || ElementCount(u.shape) == ElementCount(inst.shape));
}

// Defines instruction `index` by its element expression: fused into its user, or a kernel.
void CudaLowering::DefineElementwise(Frame& f, int32_t index, const Instruction& inst, Expr e) {
  Val v;
  v.shape = &inst.shape;
  e.depth += 1;
  if (Fusible(f, index) && e.depth <= kMaxFusionDepth) {
    v.fused = std::move(e);
  } else {
    v.buffer = NewBuffer(inst.shape);
    Launch({v.buffer}, e.buffers, ElementCount(inst.shape),
           "    " + B(v.buffer) + "[i] = " + e.code + ";\n");
  }
  f.values[static_cast<size_t>(index)] = {std::move(v)};
}

// ---- Instructions --------------------------------------------------------------------------

Status CudaLowering::Lower(Frame& f, int32_t index, int depth) {
  const Instruction& inst = Inst(f, index);
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kParameter) return Status::Ok();  // Bound to the caller's value.
  if (inst.opcode.phase != hlo::AsyncPhase::kNone) return Unsupported(inst, "asynchronous ops");
  if (!interp::IsCoreOp(op)) return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
  HLOCACHE_RETURN_IF_ERROR(interp::CheckOperandCount(m_, inst));
  if (!inst.has_shape()) return Unsupported(inst, "instructions without a shape");
  HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, inst.shape));
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, OperandShape(f, inst, k)));
  }
  switch (op) {
    case Opcode::kTuple:
      return Tuple(f, index, inst);
    case Opcode::kGetTupleElement:
      return GetTupleElement(f, index, inst);
    case Opcode::kCall:
    case Opcode::kFusion:
      return Call(f, index, inst, depth);
    default:
      break;
  }
  std::vector<const Shape*> operand_shapes;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    operand_shapes.push_back(&OperandShape(f, inst, k));
  }
  HLOCACHE_RETURN_IF_ERROR(interp::CheckShapes(m_, inst, operand_shapes));
  if (op == Opcode::kReduce) return Reduce(f, index, inst);
  if (!inst.shape.IsArray()) return Unsupported(inst, "a tuple result");
  if (op == Opcode::kConstant) {
    HLOCACHE_ASSIGN_OR_RETURN(std::string c, Constant(inst));
    Val v;
    v.shape = &inst.shape;
    v.constant = std::move(c);
    f.values[static_cast<size_t>(index)] = {std::move(v)};
    return Status::Ok();
  }
  if (IsElementwise(inst) || IsScalarBroadcast(f, inst)) {
    std::vector<std::string> in;
    std::set<int64_t> reads;
    int depth_in = 0;
    const int64_t n = ElementCount(inst.shape);
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      Val& v = Operand(f, inst, k);
      Expr e;
      if (ElementCount(*v.shape) == 1 && n != 1) {
        HLOCACHE_RETURN_IF_ERROR(Materialize(v));  // Read as element 0, never fused.
        e = At(v, "0");
      } else {
        e = Read(v);
      }
      in.push_back(e.code);
      reads.insert(e.buffers.begin(), e.buffers.end());
      depth_in = std::max(depth_in, e.depth);
    }
    HLOCACHE_ASSIGN_OR_RETURN(std::string code, ElementExpr(inst, in, operand_shapes));
    DefineElementwise(f, index, inst, {std::move(code), std::move(reads), depth_in});
    return Status::Ok();
  }
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    HLOCACHE_RETURN_IF_ERROR(Materialize(Operand(f, inst, k)));
  }
  switch (op) {
    case Opcode::kBroadcast:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kDynamicSlice:
      return AffineCopy(f, index, inst);
    case Opcode::kPad:
      return Pad(f, index, inst);
    case Opcode::kConcatenate:
      return Concatenate(f, index, inst);
    case Opcode::kDynamicUpdateSlice:
      return DynamicUpdateSlice(f, index, inst);
    case Opcode::kDot:
      return Dot(f, index, inst);
    default:
      return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
  }
}

Status CudaLowering::Tuple(Frame& f, int32_t index, const Instruction& inst) {
  Shape expected;
  Value leaves;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    expected.tuple_elements.push_back(OperandShape(f, inst, k));
    const Value& v = f.values[static_cast<size_t>(inst.operands[k])];
    leaves.insert(leaves.end(), v.begin(), v.end());
  }
  if (!hlo::SameValues(expected, inst.shape)) {
    return Malformed(inst, "the tuple's shape is not that of its operands");
  }
  f.values[static_cast<size_t>(index)] = std::move(leaves);
  return Status::Ok();
}

Status CudaLowering::GetTupleElement(Frame& f, int32_t index, const Instruction& inst) {
  const hlo::Attribute* a = inst.FindAttribute("index");
  if (a == nullptr) return Malformed(inst, "no index");
  HLOCACHE_ASSIGN_OR_RETURN(int64_t n, m_.Int(*a));
  const Shape& t = OperandShape(f, inst, 0);
  if (!t.IsTuple() || n < 0 || static_cast<size_t>(n) >= t.tuple_elements.size()) {
    return Malformed(inst, "index out of range");
  }
  if (!hlo::SameValues(t.tuple_elements[static_cast<size_t>(n)], inst.shape)) {
    return Malformed(inst, "the element's shape is not the result's");
  }
  size_t first = 0;
  for (size_t e = 0; e < static_cast<size_t>(n); ++e) {
    std::vector<const Shape*> skip;
    hlo::AppendLeafShapes(t.tuple_elements[e], skip);
    first += skip.size();
  }
  std::vector<const Shape*> mine;
  hlo::AppendLeafShapes(inst.shape, mine);
  const Value& all = f.values[static_cast<size_t>(inst.operands[0])];
  if (first + mine.size() > all.size()) return Malformed(inst, "index out of range");
  f.values[static_cast<size_t>(index)].assign(
      all.begin() + static_cast<ptrdiff_t>(first),
      all.begin() + static_cast<ptrdiff_t>(first + mine.size()));
  return Status::Ok();
}

Status CudaLowering::Call(Frame& f, int32_t index, const Instruction& inst, int depth) {
  if (inst.callees.size() != 1) return Unsupported(inst, "a call without one computation");
  const Computation& callee = m_.computations[static_cast<size_t>(inst.callees[0])];
  if (callee.parameters.size() != inst.operands.size()) {
    return Malformed(inst, "the operands do not match the called computation's parameters");
  }
  std::vector<Value> args;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const int32_t p = callee.parameters[k];
    if (p < 0 || !hlo::SameValues(callee.instructions[static_cast<size_t>(p)].shape,
                                  OperandShape(f, inst, k))) {
      return Malformed(inst, "operand " + std::to_string(k) +
                                 " is not of the called computation's parameter shape");
    }
    Value v = f.values[static_cast<size_t>(inst.operands[k])];
    for (Val& leaf : v) HLOCACHE_RETURN_IF_ERROR(Materialize(leaf));
    args.push_back(std::move(v));
  }
  if (callee.root < 0 ||
      !hlo::SameValues(callee.instructions[static_cast<size_t>(callee.root)].shape, inst.shape)) {
    return Malformed(inst, "the result is not of the called computation's root shape");
  }
  HLOCACHE_ASSIGN_OR_RETURN(Value out, Inline(inst.callees[0], std::move(args), depth + 1));
  // The leaves keep the callee's shapes, which are the same values as this instruction's.
  f.values[static_cast<size_t>(index)] = std::move(out);
  return Status::Ok();
}

// The integer list attribute `name`.
Result<std::vector<int64_t>> CudaLowering::IntList(const Instruction& inst,
                                                   const char* name) const {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return Error(Malformed(inst, std::string("no ") + name));
  return m_.IntList(*a);
}

Val CudaLowering::NewArray(const Instruction& inst) {
  Val v;
  v.shape = &inst.shape;
  v.buffer = NewBuffer(inst.shape);
  return v;
}

}  // namespace hlocache::compiler::cuda_lowering_internal
