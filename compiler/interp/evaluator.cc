// The reference interpreter's driver: calling computations instruction by instruction, elementwise
// calls over whole arrays, constants, dynamic shapes, and the dispatch of each instruction.
#include "compiler/interp/evaluator.h"

#include <algorithm>

namespace hlocache::interp::internal {

const Evaluator::CallPlan& Evaluator::PlanOf(int32_t comp_index) {
  if (plans_.empty()) plans_.resize(m_.computations.size());
  CallPlan& plan = plans_[static_cast<size_t>(comp_index)];
  if (plan.built) return plan;
  plan.built = true;
  const Computation& comp = m_.computations[static_cast<size_t>(comp_index)];
  const size_t count = comp.instructions.size();
  auto valid = [&](int32_t k) { return k >= 0 && static_cast<size_t>(k) < count; };
  auto is = [&](size_t i, Opcode op) { return comp.instructions[i].opcode.opcode == op; };
  std::vector<uint32_t> users(count, 0);
  for (const Instruction& inst : comp.instructions) {
    for (int32_t k : inst.operands) {
      if (valid(k)) ++users[static_cast<size_t>(k)];
    }
  }
  const auto root = static_cast<size_t>(comp.root);
  plan.dead.assign(count, 0);
  plan.read_through.assign(count, 0);
  plan.takes.assign(count, 0);
  plan.last_use.assign(count, 0);
  std::map<int64_t, int> parameters_numbered;
  for (size_t i = 0; i < count; ++i) {
    plan.dead[i] = is(i, Opcode::kGetTupleElement) && users[i] == 0 && i != root;
    if (is(i, Opcode::kParameter)) {
      ++parameters_numbered[comp.instructions[i].parameter_number];
      plan.read_through[i] = comp.instructions[i].shape.IsTuple() && i != root;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (plan.dead[i]) continue;
    for (int32_t k : comp.instructions[i].operands) {
      if (!valid(k)) continue;
      plan.last_use[static_cast<size_t>(k)] = i;
      if (!is(i, Opcode::kGetTupleElement)) plan.read_through[static_cast<size_t>(k)] = 0;
    }
  }
  // Which element of a read-through parameter each live get-tuple-element reads, and how many
  // read it.
  std::map<std::pair<int32_t, int64_t>, int> readers;
  std::vector<int64_t> element(count, -1);
  for (size_t i = 0; i < count; ++i) {
    const Instruction& inst = comp.instructions[i];
    if (plan.dead[i] || !is(i, Opcode::kGetTupleElement) || inst.operands.size() != 1 ||
        !valid(inst.operands[0]) || !plan.read_through[static_cast<size_t>(inst.operands[0])]) {
      continue;
    }
    if (const hlo::Attribute* a = inst.FindAttribute("index"); a != nullptr) {
      if (auto index = m_.Int(*a)) element[i] = *index;
    }
    ++readers[{inst.operands[0], element[i]}];
  }
  for (size_t i = 0; i < count; ++i) {
    if (is(i, Opcode::kParameter)) {
      plan.takes[i] = parameters_numbered[comp.instructions[i].parameter_number] == 1;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const Instruction& inst = comp.instructions[i];
    if (element[i] >= 0) {
      const auto p = static_cast<size_t>(inst.operands[0]);
      plan.takes[i] = plan.takes[p] && readers[{inst.operands[0], element[i]}] == 1;
    }
  }
  return plan;
}

bool Evaluator::LastUseOf(const Instruction& inst, size_t k) const {
  const size_t index = IndexInCurrent(inst);
  if (index == SIZE_MAX || plan_ == nullptr || k >= inst.operands.size()) return false;
  const int32_t o = inst.operands[k];
  if (o < 0 || static_cast<size_t>(o) >= comp_->instructions.size() || o == comp_->root ||
      plan_->last_use[static_cast<size_t>(o)] != index ||
      plan_->read_through[static_cast<size_t>(o)]) {
    return false;
  }
  return std::count(inst.operands.begin(), inst.operands.end(), o) == 1;
}

Literal* Evaluator::Donated(const Instruction& inst, size_t k) {
  if (values_ == nullptr || !LastUseOf(inst, k)) return nullptr;
  return &(*values_)[static_cast<size_t>(inst.operands[k])];
}

Result<Literal> Evaluator::CallWith(int32_t comp_index, std::span<const Literal> args,
                                    std::span<Literal> taken) {
  const Computation& comp = m_.computations[static_cast<size_t>(comp_index)];
  const size_t count = comp.instructions.size();
  const CallPlan& plan = PlanOf(comp_index);
  // Each value is dropped after its last use: a graph of large tensors needs the memory of
  // those alive at once, not of all it ever computed.
  std::vector<Literal> values(count);
  // The computation being evaluated, for its instructions' declared shapes and its plan
  // (restored when a call returns, whichever way).
  struct Current {
    Evaluator& e;
    const Computation* comp;
    const CallPlan* plan;
    std::vector<Literal>* values;
    std::span<Literal> taken;
    ~Current() {
      e.comp_ = comp;
      e.plan_ = plan;
      e.values_ = values;
      e.taken_ = taken;
    }
  } current{*this, comp_, plan_, values_, taken_};
  comp_ = &comp;
  plan_ = &plan;
  values_ = &values;
  taken_ = taken;
  for (size_t i = 0; i < count; ++i) {
    const Instruction& inst = comp.instructions[i];
    if (!plan.dead[i] && !plan.read_through[i]) {
      HLOCACHE_ASSIGN_OR_RETURN(values[i], Eval(inst, values, args));
    }
    for (int32_t k : inst.operands) {
      if (k >= 0 && static_cast<size_t>(k) < count && plan.last_use[static_cast<size_t>(k)] == i &&
          k != comp.root && !plan.dead[i]) {
        values[static_cast<size_t>(k)] = Literal();
      }
    }
  }
  return std::move(values[static_cast<size_t>(comp.root)]);
}

Result<Literal> Evaluator::CallElementwise(int32_t comp_index, std::span<const Literal> args) {
  const size_t n = args.empty() ? 0 : args[0].size();
  if (Mappable(comp_index)) return CallMapped(comp_index, args, static_cast<int64_t>(n));
  // One call per position, its results gathered into arrays.
  std::vector<Literal> scalars;
  for (const Literal& a : args) scalars.emplace_back(ArrayOf(a.type(), {}));
  Literal out;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < args.size(); ++k) CopyElement(args[k], i, scalars[k], 0);
    HLOCACHE_ASSIGN_OR_RETURN(Literal r, Call(comp_index, scalars));
    if (i == 0) out = Literal(Spread(r.shape(), static_cast<int64_t>(n)));
    if (r.is_tuple()) {
      for (size_t k = 0; k < r.elements().size(); ++k) {
        CopyElement(r.elements()[k], 0, out.elements()[k], i);
      }
    } else {
      CopyElement(r, 0, out, i);
    }
  }
  if (n == 0) {
    const Computation& comp = m_.computations[static_cast<size_t>(comp_index)];
    out = Literal(Spread(comp.instructions[static_cast<size_t>(comp.root)].shape, 0));
  }
  return out;
}

// Whether computation `c` can be evaluated once over whole arrays of its scalars (CallMapped):
// every instruction is a scalar elementwise op, a constant, a parameter, a tuple of scalars or
// an element of one, or a call of such a computation.
bool Evaluator::Mappable(int32_t c, int depth) {
  if (mappable_.empty()) mappable_.assign(m_.computations.size(), -1);
  int8_t& known = mappable_[static_cast<size_t>(c)];
  if (known >= 0) return known == 1;
  known = 0;  // Also stops a computation that calls itself.
  if (depth > 16) return false;
  const Computation& comp = m_.computations[static_cast<size_t>(c)];
  if (comp.root < 0) return false;
  for (const Instruction& inst : comp.instructions) {
    if (inst.opcode.phase != hlo::AsyncPhase::kNone || !inst.has_shape() ||
        !IsScalarOrScalars(inst.shape)) {
      return false;
    }
    const Opcode op = inst.opcode.opcode;
    if (op == Opcode::kCall || op == Opcode::kFusion) {
      if (inst.callees.size() != 1 || !Mappable(inst.callees[0], depth + 1)) return false;
      continue;
    }
    if (!IsMappableOp(op) ||
        (inst.shape.IsTuple() && op != Opcode::kTuple && op != Opcode::kParameter)) {
      return false;
    }
  }
  known = 1;
  return true;
}

// Computation `c` of scalars evaluated once over arrays of `n` elements: each instruction on
// whole arrays, with the same per-element semantics as Call (every core elementwise op
// computes element i from elements i alone).
Result<Literal> Evaluator::CallMapped(int32_t c, std::span<const Literal> args, int64_t n) {
  const Computation& comp = m_.computations[static_cast<size_t>(c)];
  std::vector<Literal> values(comp.instructions.size());
  for (size_t i = 0; i < comp.instructions.size(); ++i) {
    const Instruction& inst = comp.instructions[i];
    auto operand = [&](size_t k) -> const Literal& { return values[inst.operands[k]]; };
    switch (inst.opcode.opcode) {
      case Opcode::kParameter: {
        const auto p = static_cast<size_t>(inst.parameter_number);
        if (p >= args.size() || !hlo::SameValues(args[p].shape(), Spread(inst.shape, n))) {
          return Error(InvalidArgument("parameter " + std::to_string(p) + " has no argument"));
        }
        values[i] = args[p];
        continue;
      }
      case Opcode::kConstant: {
        HLOCACHE_ASSIGN_OR_RETURN(Literal scalar, ConstantValue(m_, inst));
        Literal spread(ArrayOf(inst.shape.type, {n}));
        for (size_t j = 0; j < spread.size(); ++j) CopyElement(scalar, 0, spread, j);
        values[i] = std::move(spread);
        continue;
      }
      case Opcode::kTuple: {
        Shape s;
        for (int32_t o : inst.operands) s.tuple_elements.push_back(values[o].shape());
        Literal t(s);
        for (size_t k = 0; k < inst.operands.size(); ++k) t.elements()[k] = operand(k);
        values[i] = std::move(t);
        continue;
      }
      case Opcode::kGetTupleElement: {
        HLOCACHE_ASSIGN_OR_RETURN(Literal e, Eval(inst, values, args));
        values[i] = std::move(e);
        continue;
      }
      case Opcode::kCall:
      case Opcode::kFusion: {
        std::vector<Literal> call_args;
        for (size_t k = 0; k < inst.operands.size(); ++k) call_args.push_back(operand(k));
        HLOCACHE_ASSIGN_OR_RETURN(values[i], CallMapped(inst.callees[0], call_args, n));
        continue;
      }
      default:
        break;
    }
    HLOCACHE_RETURN_IF_ERROR(CheckOperandCount(m_, inst));
    Literal out(ArrayOf(inst.shape.type, {n}));
    std::vector<const Shape*> operand_shapes;
    for (int32_t k : inst.operands) operand_shapes.push_back(&values[k].shape());
    HLOCACHE_RETURN_IF_ERROR(CheckCoreShapes(*this, inst, operand_shapes, out.shape()));
    HLOCACHE_ASSIGN_OR_RETURN(values[i], EvalInto(inst, values, std::move(out)));
  }
  return std::move(values[static_cast<size_t>(comp.root)]);
}

Result<Literal> Evaluator::Eval(const Instruction& inst, std::vector<Literal>& values,
                                std::span<const Literal> args) {
  if (inst.opcode.phase != hlo::AsyncPhase::kNone) {
    return Error(Unsupported(inst, "asynchronous ops"));
  }
  auto operand = [&](size_t k) -> const Literal& { return values[inst.operands[k]]; };
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kParameter) {
    const auto n = static_cast<size_t>(inst.parameter_number);
    if (n >= args.size()) {
      return Error(InvalidArgument("parameter " + std::to_string(n) + " has no argument"));
    }
    const size_t at = IndexInCurrent(inst);
    if (!taken_.empty() && at != SIZE_MAX && plan_->takes[at]) return std::move(taken_[n]);
    return args[n];
  }
  if (op == Opcode::kTuple) {
    // Of its elements' shapes: a dynamic element's are its sizes at run time.
    Shape shape;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      shape.tuple_elements.push_back(operand(k).shape());
    }
    Literal out(shape);
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      if (LastUseOf(inst, k)) {
        out.elements()[k] = std::move(values[static_cast<size_t>(inst.operands[k])]);
      } else {
        out.elements()[k] = operand(k);
      }
    }
    return out;
  }
  if (op == Opcode::kGetTupleElement) {
    const hlo::Attribute* a = inst.FindAttribute("index");
    if (a == nullptr) return Error(Unsupported(inst, "get-tuple-element without an index"));
    HLOCACHE_ASSIGN_OR_RETURN(int64_t index, m_.Int(*a));
    const size_t at = IndexInCurrent(inst);
    if (at != SIZE_MAX && inst.operands.size() == 1 && inst.operands[0] >= 0 &&
        plan_->read_through[static_cast<size_t>(inst.operands[0])]) {
      // An element of a parameter that is never built: read from the argument itself.
      const Instruction& p = comp_->instructions[static_cast<size_t>(inst.operands[0])];
      const auto n = static_cast<size_t>(p.parameter_number);
      if (n >= args.size()) {
        return Error(InvalidArgument("parameter " + std::to_string(n) + " has no argument"));
      }
      const Literal& t = args[n];
      if (!t.is_tuple() || index < 0 || static_cast<size_t>(index) >= t.elements().size()) {
        return Error(InvalidArgument("get-tuple-element index out of range"));
      }
      if (!taken_.empty() && plan_->takes[at]) {
        return std::move(taken_[n].elements()[static_cast<size_t>(index)]);
      }
      return t.elements()[static_cast<size_t>(index)];
    }
    const Literal& t = operand(0);
    if (!t.is_tuple() || index < 0 || static_cast<size_t>(index) >= t.elements().size()) {
      return Error(InvalidArgument("get-tuple-element index out of range"));
    }
    if (LastUseOf(inst, 0)) {
      return std::move(
          values[static_cast<size_t>(inst.operands[0])].elements()[static_cast<size_t>(index)]);
    }
    return t.elements()[static_cast<size_t>(index)];
  }
  const bool dynamic = TouchesDynamicShapes(inst);
  if (dynamic) HLOCACHE_RETURN_IF_ERROR(CheckDynamicShapes(inst));
  if (IsExtendedOp(op)) {
    if (!inst.has_shape()) return Error(Unsupported(inst, "instructions without a shape"));
    std::vector<const Literal*> operands;
    std::vector<const Shape*> shapes;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      operands.push_back(&operand(k));
      shapes.push_back(&operand(k).shape());
    }
    HLOCACHE_RETURN_IF_ERROR(CheckExtendedShapes(*this, inst, shapes));
    return EvalExtended(*this, inst, operands);
  }
  if (!IsCoreOp(op)) {
    return Error(Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'"));
  }
  if (op == Opcode::kCall || op == Opcode::kFusion) {
    if (inst.callees.size() != 1) return Error(Unsupported(inst, "call without one callee"));
    std::vector<Literal> call_args;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      Literal* donated = Donated(inst, k);
      call_args.push_back(donated != nullptr ? std::move(*donated) : operand(k));
    }
    return CallTaking(inst.callees[0], call_args);
  }
  if (!inst.has_shape()) return Error(Unsupported(inst, "instructions without a shape"));
  HLOCACHE_RETURN_IF_ERROR(CheckOperandCount(m_, inst));
  if (dynamic && inst.shape.IsDynamic()) {
    // The op on its operands' values at their sizes, into a result of the sizes they give.
    std::vector<const Shape*> declared;
    std::vector<const hlo::Dims*> runtime;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      declared.push_back(&DeclaredShape(inst.operands[k]));
      runtime.push_back(&operand(k).shape().dims);
    }
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                              RuntimeDims(*this, inst, declared, runtime));
    Instruction sized = inst;
    sized.shape.dims = std::move(dims);
    sized.shape.dynamic.clear();
    return EvalStatic(sized, values);
  }
  return EvalStatic(inst, values);
}

// Whether `inst`, an instruction of the computation being evaluated, has a dynamic shape or
// an operand of one (dynamic_shapes.h).
bool Evaluator::TouchesDynamicShapes(const Instruction& inst) const {
  if (IndexInCurrent(inst) == SIZE_MAX) {
    return false;  // A computation of scalars evaluated over arrays: no dynamic shapes.
  }
  if (hlo::HasDynamicLeaf(inst.shape)) return true;
  for (int32_t o : inst.operands) {
    if (o >= 0 && static_cast<size_t>(o) < comp_->instructions.size() &&
        hlo::HasDynamicLeaf(DeclaredShape(o))) {
      return true;
    }
  }
  return false;
}

// Refuses the ops that take no dynamic shapes, and unbounded dimensions.
Status Evaluator::CheckDynamicShapes(const Instruction& inst) const {
  std::vector<const Shape*> operands;
  for (int32_t o : inst.operands) operands.push_back(&DeclaredShape(o));
  const std::string why = WhyNotDynamic(inst, operands);
  return why.empty() ? Status::Ok() : Unsupported(inst, why);
}

// A core op of static shapes (or sized to its run time ones): checked, then evaluated.
Result<Literal> Evaluator::EvalStatic(const Instruction& inst, std::vector<Literal>& values) {
  auto made = Literal::MakeZeros(inst.shape);
  if (!made) return Error(Unsupported(inst, made.error().message()));
  Literal out = std::move(*made);
  std::vector<const Shape*> operand_shapes;
  for (int32_t k : inst.operands) operand_shapes.push_back(&values[k].shape());
  HLOCACHE_RETURN_IF_ERROR(CheckCoreShapes(*this, inst, operand_shapes, out.shape()));
  return EvalInto(inst, values, std::move(out));
}

// The core op `inst` on `values` (its operands among them), into `out`, a literal of its
// result's shape that CheckShapes accepted.
Result<Literal> Evaluator::EvalInto(const Instruction& inst, std::vector<Literal>& values,
                                    Literal out) {
  auto operand = [&](size_t k) -> const Literal& { return values[inst.operands[k]]; };
  const Opcode op = inst.opcode.opcode;
  switch (op) {
    case Opcode::kConstant:
      HLOCACHE_RETURN_IF_ERROR(FillConstant(m_, inst, out));
      return out;
    case Opcode::kIota: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "iota_dimension"));
      if (d.size() != 1 || d[0] < 0 || d[0] >= out.shape().rank()) {
        return Error(InvalidArgument("bad iota_dimension"));
      }
      ForEachIndex(out, [&](size_t i, std::span<const int64_t> idx) {
        Store(out, i, static_cast<double>(idx[static_cast<size_t>(d[0])]), idx[d[0]]);
      });
      return out;
    }
    case Opcode::kBroadcast: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
      const Literal& in = operand(0);
      if (dims.size() != in.shape().dims.size()) return Error(InvalidArgument("bad broadcast"));
      const auto in_strides = hlo::RowMajorStrides(in.shape().dims);
      ForEachIndex(out, [&](size_t i, std::span<const int64_t> idx) {
        int64_t off = 0;
        for (size_t k = 0; k < dims.size(); ++k) off += idx[dims[k]] * in_strides[k];
        CopyElement(in, static_cast<size_t>(off), out, i);
      });
      return out;
    }
    case Opcode::kBitcast:
      if (!inst.shape.HasDefaultLayout() || !operand(0).shape().HasDefaultLayout()) {
        return Error(Unsupported(inst, "bitcast between non-default layouts"));
      }
      [[fallthrough]];
    case Opcode::kReshape:
    case Opcode::kCopy: {
      const Literal& in = operand(0);
      if (in.is_tuple() || in.size() != out.size() || in.type() != out.type()) {
        return Error(Unsupported(inst, "a reshape that changes the element count or type"));
      }
      for (size_t i = 0; i < out.size(); ++i) CopyElement(in, i, out, i);
      return out;
    }
    case Opcode::kTranspose: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, Ints(inst, "dimensions"));
      const Literal& in = operand(0);
      const auto in_strides = hlo::RowMajorStrides(in.shape().dims);
      if (perm.size() != in_strides.size()) return Error(InvalidArgument("bad transpose"));
      ForEachIndex(out, [&](size_t i, std::span<const int64_t> idx) {
        int64_t off = 0;
        for (size_t k = 0; k < perm.size(); ++k) off += idx[k] * in_strides[perm[k]];
        CopyElement(in, static_cast<size_t>(off), out, i);
      });
      return out;
    }
    case Opcode::kConvert: {
      const Literal& in = operand(0);
      for (size_t i = 0; i < out.size(); ++i) Convert(in, i, out, i);
      return out;
    }
    case Opcode::kSelect: {
      const Literal& p = operand(0);
      const bool scalar = p.size() == 1 && out.size() != 1;
      for (size_t i = 0; i < out.size(); ++i) {
        CopyElement(p.GetInt(scalar ? 0 : i) != 0 ? operand(1) : operand(2), i, out, i);
      }
      return out;
    }
    case Opcode::kClamp: {
      const Literal& lo = operand(0);
      const Literal& x = operand(1);
      const Literal& hi = operand(2);
      for (size_t i = 0; i < out.size(); ++i) {
        const size_t li = lo.size() == 1 ? 0 : i, hi_i = hi.size() == 1 ? 0 : i;
        if (out.is_float()) {
          out.SetFloat(i, std::min(std::max(x.GetFloat(i), lo.GetFloat(li)), hi.GetFloat(hi_i)));
        } else if (IsUnsigned(out.type())) {
          auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
          out.SetInt(i, static_cast<int64_t>(std::min(std::max(u(x.GetInt(i)), u(lo.GetInt(li))),
                                                      u(hi.GetInt(hi_i)))));
        } else {
          out.SetInt(i, std::min(std::max(x.GetInt(i), lo.GetInt(li)), hi.GetInt(hi_i)));
        }
      }
      return out;
    }
    case Opcode::kCompare:
      HLOCACHE_RETURN_IF_ERROR(Compare(inst, operand(0), operand(1), out));
      return out;
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kPad:
    case Opcode::kConcatenate:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice:
      HLOCACHE_RETURN_IF_ERROR(MoveData(inst, values, out));
      return out;
    case Opcode::kReduce:
      HLOCACHE_RETURN_IF_ERROR(Reduce(inst, values, out));
      return out;
    case Opcode::kDot:
      HLOCACHE_RETURN_IF_ERROR(Dot(inst, operand(0), operand(1), out));
      return out;
    default:
      break;
  }
  if (inst.operands.size() == 1) {
    HLOCACHE_RETURN_IF_ERROR(Unary(inst, operand(0), out));
    return out;
  }
  if (inst.operands.size() == 2) {
    HLOCACHE_RETURN_IF_ERROR(Binary(inst, operand(0), operand(1), out));
    return out;
  }
  return Error(Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'"));
}

}  // namespace hlocache::interp::internal
