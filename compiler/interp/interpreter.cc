#include "compiler/interp/interpreter.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>

#include "compiler/interp/eval_context.h"
#include "compiler/interp/extended_ops.h"
#include "compiler/semantics/dynamic_shapes.h"

namespace hlocache::interp {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Steps a row-major multi-index; false after the last one.
bool Next(std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

// A float's place in the total order, as a signed integer: its bits, with the magnitude's
// flipped when negative. Through double, which keeps every narrower float's sign, order and
// NaNs (generated code computes the same key, hc_total_key).
int64_t TotalOrderKey(double v) {
  const auto bits = std::bit_cast<int64_t>(v);
  return bits < 0 ? bits ^ std::numeric_limits<int64_t>::max() : bits;
}

int64_t Offset(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
  return off;
}

bool IsUnsigned(PrimitiveType t) { return hlo::IsUnsignedInt(t); }
int Bits(PrimitiveType t) { return hlo::PrimitiveTypeBits(t); }

// The value range of an integer type, as doubles, for saturating conversions.
std::pair<double, double> IntRange(PrimitiveType t) {
  const int bits = Bits(t);
  if (t == PrimitiveType::kPred) return {0, 1};
  if (IsUnsigned(t)) return {0, std::ldexp(1.0, bits) - 1};
  return {-std::ldexp(1.0, bits - 1), std::ldexp(1.0, bits - 1) - 1};
}

// The parser takes any operand count; the core ops index their operands, so a module with
// the wrong number is refused before it is evaluated or lowered.
Status OperandCountStatus(const hlo::Module& m, const hlo::Instruction& inst) {
  if (IsExtendedOp(inst.opcode.opcode)) return Status::Ok();  // Its family checks the count.
  size_t min = 0, max = 0;
  switch (inst.opcode.opcode) {
    case Opcode::kConstant:
    case Opcode::kIota:
    case Opcode::kParameter:
      break;
    case Opcode::kTuple:
    case Opcode::kCall:
    case Opcode::kFusion:
      max = SIZE_MAX;
      break;
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kBitcast:
    case Opcode::kCopy:
    case Opcode::kTranspose:
    case Opcode::kConvert:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kGetTupleElement:
      min = max = 1;
      break;
    case Opcode::kCompare:
    case Opcode::kDot:
    case Opcode::kPad:
      min = max = 2;
      break;
    case Opcode::kSelect:
    case Opcode::kClamp:
      min = max = 3;
      break;
    case Opcode::kDynamicSlice:
    case Opcode::kConcatenate:
      min = 1;
      max = SIZE_MAX;
      break;
    case Opcode::kDynamicUpdateSlice:
    case Opcode::kReduce:
      min = 2;
      max = SIZE_MAX;
      break;
    default:  // Elementwise: one or two operands.
      min = 1;
      max = 2;
      break;
  }
  if (inst.operands.size() < min || inst.operands.size() > max) {
    return InvalidArgument(m.filename() + ":" + std::to_string(m.LineOf(inst.offset)) + ": '" +
                           std::string(inst.name) + "' (" +
                           std::string(hlo::OpcodeName(inst.opcode.opcode)) + ") has " +
                           std::to_string(inst.operands.size()) + " operands");
  }
  return Status::Ok();
}

// What shape checking needs to know of a value: its shape. Lets one checker serve the
// interpreter (on literals) and the code generator (on declared shapes).
class ShapeView {
 public:
  explicit ShapeView(const Shape& shape) : shape_(&shape) {}
  const Shape& shape() const { return *shape_; }
  PrimitiveType type() const { return shape_->type; }
  bool is_tuple() const { return shape_->IsTuple(); }
  bool is_float() const { return hlo::IsFloat(shape_->type); }
  size_t size() const {
    auto n = shape_->BoundElementCount();  // A declared dynamic shape at its bounds.
    return n ? static_cast<size_t>(*n) : 0;
  }
  std::vector<ShapeView> elements() const {
    std::vector<ShapeView> out;
    for (const Shape& e : shape_->tuple_elements) out.emplace_back(e);
    return out;
  }

 private:
  const Shape* shape_;
};

}  // namespace

namespace {

class Evaluator : public EvalContext {
 public:
  explicit Evaluator(const hlo::Module& m, HostTransfers* host = nullptr)
      : EvalContext(m), m_(m), host_(host) {}

  Result<Literal> Constant(const Instruction& inst) const {
    auto made = Literal::MakeZeros(inst.shape);
    if (!made) return Error(Unsupported(inst, made.error().message()));
    HLOCACHE_RETURN_IF_ERROR(FillConstant(inst, *made));
    return std::move(*made);
  }

  Result<Literal> Call(int32_t comp_index, std::span<const Literal> args) override {
    const Computation& comp = m_.computations[static_cast<size_t>(comp_index)];
    const size_t count = comp.instructions.size();
    // Each value is dropped after its last use: a graph of large tensors needs the memory of
    // those alive at once, not of all it ever computed.
    std::vector<size_t> last_use(count, 0);
    for (size_t i = 0; i < count; ++i) {
      for (int32_t k : comp.instructions[i].operands) {
        if (k >= 0 && static_cast<size_t>(k) < count) last_use[static_cast<size_t>(k)] = i;
      }
    }
    std::vector<Literal> values(count);
    // The computation being evaluated, for its instructions' declared shapes (restored when a
    // call returns, whichever way).
    struct Current {
      const Computation*& slot;
      const Computation* outer;
      ~Current() { slot = outer; }
    } current{comp_, comp_};
    comp_ = &comp;
    for (size_t i = 0; i < count; ++i) {
      HLOCACHE_ASSIGN_OR_RETURN(values[i], Eval(comp.instructions[i], values, args));
      for (int32_t k : comp.instructions[i].operands) {
        if (k >= 0 && static_cast<size_t>(k) < count && last_use[static_cast<size_t>(k)] == i &&
            k != comp.root) {
          values[static_cast<size_t>(k)] = Literal();
        }
      }
    }
    return std::move(values[static_cast<size_t>(comp.root)]);
  }

  uint64_t* RngState(const Instruction& inst) override { return rng_states_[&inst].data(); }

  HostTransfers* Host() override { return host_; }

  Result<Literal> CallElementwise(int32_t comp_index, std::span<const Literal> args) override {
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

 private:
  static Shape ArrayOf(PrimitiveType type, std::vector<int64_t> dims) {
    Shape s;
    s.type = type;
    s.dims = std::move(dims);
    return s;
  }

  // `s` (a scalar or a tuple of scalars) with `n` elements in each array.
  static Shape Spread(const Shape& s, int64_t n) {
    if (!s.IsTuple()) return ArrayOf(s.type, {n});
    Shape t;
    for (const Shape& e : s.tuple_elements) t.tuple_elements.push_back(Spread(e, n));
    return t;
  }

  static bool IsScalarOrScalars(const Shape& s) {
    if (!s.IsTuple()) return !s.is_buffer && s.dims.empty();
    for (const Shape& e : s.tuple_elements) {
      if (e.IsTuple() || !IsScalarOrScalars(e)) return false;
    }
    return true;
  }

  // Whether computation `c` can be evaluated once over whole arrays of its scalars (CallMapped):
  // every instruction is a scalar elementwise op, a constant, a parameter, a tuple of scalars or
  // an element of one, or a call of such a computation.
  bool Mappable(int32_t c, int depth = 0) {
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

  static bool IsMappableOp(Opcode op) { return IsCoreElementwiseOp(op); }

  // Computation `c` of scalars evaluated once over arrays of `n` elements: each instruction on
  // whole arrays, with the same per-element semantics as Call (every core elementwise op
  // computes element i from elements i alone).
  Result<Literal> CallMapped(int32_t c, std::span<const Literal> args, int64_t n) {
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
          HLOCACHE_ASSIGN_OR_RETURN(Literal scalar, Constant(inst));
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
      HLOCACHE_RETURN_IF_ERROR(OperandCountStatus(m_, inst));
      Literal out(ArrayOf(inst.shape.type, {n}));
      std::vector<ShapeView> operand_shapes;
      for (int32_t k : inst.operands) operand_shapes.emplace_back(values[k].shape());
      HLOCACHE_RETURN_IF_ERROR(CheckShapes(inst, operand_shapes, ShapeView(out.shape())));
      HLOCACHE_ASSIGN_OR_RETURN(values[i], EvalInto(inst, values, std::move(out)));
    }
    return std::move(values[static_cast<size_t>(comp.root)]);
  }

  std::vector<int8_t> mappable_;  // Per computation: -1 not yet known, 0 no, 1 yes.
  std::map<const Instruction*, std::array<uint64_t, 2>> rng_states_;

  std::vector<int64_t> IntsOrEmpty(const Instruction& inst, const char* name) const {
    const hlo::Attribute* a = inst.FindAttribute(name);
    if (a == nullptr) return {};
    auto v = m_.IntList(*a);
    return v ? *v : std::vector<int64_t>();
  }

  Result<Literal> Eval(const Instruction& inst, std::vector<Literal>& values,
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
      return args[n];
    }
    if (op == Opcode::kTuple) {
      // Of its elements' shapes: a dynamic element's are its sizes at run time.
      Shape shape;
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        shape.tuple_elements.push_back(operand(k).shape());
      }
      Literal out(shape);
      for (size_t k = 0; k < inst.operands.size(); ++k) out.elements()[k] = operand(k);
      return out;
    }
    if (op == Opcode::kGetTupleElement) {
      const hlo::Attribute* a = inst.FindAttribute("index");
      if (a == nullptr) return Error(Unsupported(inst, "get-tuple-element without an index"));
      HLOCACHE_ASSIGN_OR_RETURN(int64_t index, m_.Int(*a));
      const Literal& t = operand(0);
      if (!t.is_tuple() || index < 0 || static_cast<size_t>(index) >= t.elements().size()) {
        return Error(InvalidArgument("get-tuple-element index out of range"));
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
      for (size_t k = 0; k < inst.operands.size(); ++k) call_args.push_back(operand(k));
      return Call(inst.callees[0], call_args);
    }
    if (!inst.has_shape()) return Error(Unsupported(inst, "instructions without a shape"));
    HLOCACHE_RETURN_IF_ERROR(OperandCountStatus(m_, inst));
    if (dynamic && inst.shape.IsDynamic()) {
      // The op on its operands' values at their sizes, into a result of the sizes they give.
      std::vector<const Shape*> declared;
      std::vector<const std::vector<int64_t>*> runtime;
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

  // The declared shape of instruction `i` of the computation being evaluated.
  const Shape& DeclaredShape(int32_t i) const {
    return comp_->instructions[static_cast<size_t>(i)].shape;
  }

  // Whether `inst`, an instruction of the computation being evaluated, has a dynamic shape or
  // an operand of one (dynamic_shapes.h).
  bool TouchesDynamicShapes(const Instruction& inst) const {
    if (comp_ == nullptr || &inst < comp_->instructions.data() ||
        &inst >= comp_->instructions.data() + comp_->instructions.size()) {
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
  Status CheckDynamicShapes(const Instruction& inst) const {
    std::vector<const Shape*> operands;
    for (int32_t o : inst.operands) operands.push_back(&DeclaredShape(o));
    const std::string why = WhyNotDynamic(inst, operands);
    return why.empty() ? Status::Ok() : Unsupported(inst, why);
  }

  // A core op of static shapes (or sized to its run time ones): checked, then evaluated.
  Result<Literal> EvalStatic(const Instruction& inst, std::vector<Literal>& values) {
    auto made = Literal::MakeZeros(inst.shape);
    if (!made) return Error(Unsupported(inst, made.error().message()));
    Literal out = std::move(*made);
    std::vector<ShapeView> operand_shapes;
    for (int32_t k : inst.operands) operand_shapes.emplace_back(values[k].shape());
    HLOCACHE_RETURN_IF_ERROR(CheckShapes(inst, operand_shapes, ShapeView(out.shape())));
    return EvalInto(inst, values, std::move(out));
  }

  // The core op `inst` on `values` (its operands among them), into `out`, a literal of its
  // result's shape that CheckShapes accepted.
  Result<Literal> EvalInto(const Instruction& inst, std::vector<Literal>& values, Literal out) {
    auto operand = [&](size_t k) -> const Literal& { return values[inst.operands[k]]; };
    const Opcode op = inst.opcode.opcode;
    switch (op) {
      case Opcode::kConstant:
        HLOCACHE_RETURN_IF_ERROR(FillConstant(inst, out));
        return out;
      case Opcode::kIota: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "iota_dimension"));
        if (d.size() != 1 || d[0] < 0 || d[0] >= out.shape().rank()) {
          return Error(InvalidArgument("bad iota_dimension"));
        }
        ForEachIndex(out, [&](size_t i, const std::vector<int64_t>& idx) {
          Store(out, i, static_cast<double>(idx[static_cast<size_t>(d[0])]), idx[d[0]]);
        });
        return out;
      }
      case Opcode::kBroadcast: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
        const Literal& in = operand(0);
        if (dims.size() != in.shape().dims.size()) return Error(InvalidArgument("bad broadcast"));
        const auto in_strides = hlo::RowMajorStrides(in.shape().dims);
        ForEachIndex(out, [&](size_t i, const std::vector<int64_t>& idx) {
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
        ForEachIndex(out, [&](size_t i, const std::vector<int64_t>& idx) {
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

 public:
  // The parser does not infer shapes, so a module may claim any shape for any instruction. The
  // evaluation below indexes operands by the output's shape; this refuses every combination that
  // would make it read or write out of bounds, or mix element kinds.
  Status Bad(const Instruction& inst, const std::string& why) const {
    return InvalidArgument(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) + ": '" +
                           std::string(inst.name) + "' (" +
                           std::string(hlo::OpcodeName(inst.opcode.opcode)) + "): " + why);
  }

  // dot on operands that are not the instruction's own (scaled-dot's, dequantized).
  Status DotOf(const Instruction& inst, const Literal& lhs, const Literal& rhs,
               Literal& out) const {
    return Dot(inst, lhs, rhs, out);
  }

  // dot's shape rules, on the operands `lhs` and `rhs` (scaled-dot's dequantized operands too).
  Status CheckDot(const Instruction& inst, const ShapeView& lhs, const ShapeView& rhs,
                  const ShapeView& out) const {
    const auto& od = out.shape().dims;
    const auto lb = IntsOrEmpty(inst, "lhs_batch_dims"), rb = IntsOrEmpty(inst, "rhs_batch_dims");
    const auto lc = IntsOrEmpty(inst, "lhs_contracting_dims");
    const auto rc = IntsOrEmpty(inst, "rhs_contracting_dims");
    const auto& ld = lhs.shape().dims;
    const auto& rd = rhs.shape().dims;
    std::vector<int64_t> lall = lb, rall = rb;
    lall.insert(lall.end(), lc.begin(), lc.end());
    rall.insert(rall.end(), rc.begin(), rc.end());
    if (lb.size() != rb.size() || lc.size() != rc.size() ||
        !hlo::AreDistinctDimensions(lall, ld.size()) ||
        !hlo::AreDistinctDimensions(rall, rd.size())) {
      return Bad(inst, "batch and contracting dimensions do not pair up");
    }
    std::vector<int64_t> want;
    for (size_t k = 0; k < lb.size(); ++k) {
      if (ld[static_cast<size_t>(lb[k])] != rd[static_cast<size_t>(rb[k])]) {
        return Bad(inst, "batch dimensions differ in size");
      }
      want.push_back(ld[static_cast<size_t>(lb[k])]);
    }
    for (size_t k = 0; k < lc.size(); ++k) {
      if (ld[static_cast<size_t>(lc[k])] != rd[static_cast<size_t>(rc[k])]) {
        return Bad(inst, "contracting dimensions differ in size");
      }
    }
    for (size_t d = 0; d < ld.size(); ++d) {
      if (std::find(lall.begin(), lall.end(), static_cast<int64_t>(d)) == lall.end()) {
        want.push_back(ld[d]);
      }
    }
    for (size_t d = 0; d < rd.size(); ++d) {
      if (std::find(rall.begin(), rall.end(), static_cast<int64_t>(d)) == rall.end()) {
        want.push_back(rd[d]);
      }
    }
    if (want != od) return Bad(inst, "the result's dimensions are not batch, lhs free, rhs free");
    // Integer (and pred) operands of a float dot are converted to its type (XLA's operand
    // upcasting, as in an int4-weight matmul); floats into an integer result are not.
    if ((lhs.is_float() && !out.is_float()) || (rhs.is_float() && !out.is_float())) {
      return Bad(inst, "mixes integer and floating-point operands");
    }
    return Status::Ok();
  }

  Status CheckShapes(const Instruction& inst, std::span<const ShapeView> operands,
                     const ShapeView& out) const {
    const Opcode op = inst.opcode.opcode;
    auto bad = [&](const std::string& why) {
      return InvalidArgument(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) + ": '" +
                             std::string(inst.name) + "' (" + std::string(hlo::OpcodeName(op)) +
                             "): " + why);
    };
    auto arg = [&](size_t k) -> const ShapeView& { return operands[k]; };
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      if (arg(k).is_tuple()) return bad("operand " + std::to_string(k) + " is a tuple");
    }
    if (out.is_tuple() && op != Opcode::kReduce) return bad("a tuple result");
    const auto& od = out.shape().dims;
    const size_t rank = inst.operands.empty() ? 0 : arg(0).shape().dims.size();
    const auto& in_dims = inst.operands.empty() ? od : arg(0).shape().dims;
    auto is_scalar_int = [&](size_t k) { return arg(k).size() == 1 && !arg(k).is_float(); };
    switch (op) {
      case Opcode::kConstant:
      case Opcode::kIota:
        return Status::Ok();
      case Opcode::kBroadcast: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
        if (d.size() != rank) return bad("dimensions={...} does not match the operand's rank");
        for (size_t k = 0; k < d.size(); ++k) {
          if (d[k] < 0 || static_cast<size_t>(d[k]) >= od.size() ||
              od[static_cast<size_t>(d[k])] != in_dims[k]) {
            return bad("operand dimension " + std::to_string(k) + " does not map onto the result");
          }
        }
        break;
      }
      case Opcode::kTranspose: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
        if (d.size() != rank || od.size() != rank || !hlo::AreDistinctDimensions(d, rank)) {
          return bad("dimensions={...} is not a permutation of the operand's");
        }
        for (size_t k = 0; k < rank; ++k) {
          if (od[k] != in_dims[static_cast<size_t>(d[k])]) return bad("result dimensions differ");
        }
        break;
      }
      case Opcode::kReshape:
      case Opcode::kBitcast:
      case Opcode::kCopy:
      case Opcode::kConvert:
        if (arg(0).size() != out.size()) return bad("the element count changes");
        break;
      case Opcode::kSelect:
        if (arg(0).type() != PrimitiveType::kPred ||
            (arg(0).size() != out.size() && arg(0).size() != 1)) {
          return bad("the predicate is not pred of the result's shape");
        }
        for (size_t k : {1, 2}) {
          if (arg(k).type() != out.type() || arg(k).size() != out.size()) {
            return bad("operand " + std::to_string(k) + " is not of the result's shape");
          }
        }
        break;
      case Opcode::kClamp:
        for (size_t k : {0, 1, 2}) {
          if (arg(k).type() != out.type() ||
              (arg(k).size() != out.size() && !(k != 1 && arg(k).size() == 1))) {
            return bad("operand " + std::to_string(k) + " is not of the result's shape");
          }
        }
        break;
      case Opcode::kCompare:
        if (out.type() != PrimitiveType::kPred || arg(0).type() != arg(1).type() ||
            arg(0).size() != out.size() || arg(1).size() != out.size()) {
          return bad("operands and result do not match");
        }
        break;
      case Opcode::kDot:
        return CheckDot(inst, arg(0), arg(1), out);
      case Opcode::kReduce: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
        const size_t n = inst.operands.size() / 2;
        if (inst.operands.size() % 2 != 0 || !hlo::AreDistinctDimensions(d, rank)) {
          return bad("operands, inits or dimensions={...} do not pair up");
        }
        std::vector<int64_t> kept;
        for (size_t k = 0; k < rank; ++k) {
          if (std::find(d.begin(), d.end(), static_cast<int64_t>(k)) == d.end()) {
            kept.push_back(in_dims[k]);
          }
        }
        if (out.is_tuple() != (n > 1) || (n > 1 && out.elements().size() != n)) {
          return bad("the result does not hold one value per operand");
        }
        for (size_t k = 0; k < n; ++k) {
          const ShapeView result = n == 1 ? out : out.elements()[k];
          if (result.is_tuple() || arg(k).shape().dims != in_dims || arg(n + k).size() != 1 ||
              arg(n + k).type() != arg(k).type() || result.type() != arg(k).type() ||
              result.shape().dims != kept) {
            return bad("operand " + std::to_string(k) + ", its init and its result disagree");
          }
        }
        break;
      }
      case Opcode::kSlice: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, SliceSpec(inst));
        if (spec.size() != 3 * rank || od.size() != rank) return bad("slice={...} of another rank");
        for (size_t k = 0; k < rank; ++k) {
          const int64_t start = spec[3 * k], limit = spec[3 * k + 1], stride = spec[3 * k + 2];
          if (start < 0 || limit < start || limit > in_dims[k] || stride < 1 ||
              od[k] != (limit - start + stride - 1) / stride) {
            return bad("slice bounds of dimension " + std::to_string(k) + " do not fit");
          }
        }
        break;
      }
      case Opcode::kPad: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, PaddingSpec(inst));
        if (spec.size() != 3 * rank || od.size() != rank || arg(1).size() != 1 ||
            arg(1).type() != out.type()) {
          return bad("padding or the padding value does not fit the operand");
        }
        for (size_t k = 0; k < rank; ++k) {
          const int64_t low = spec[3 * k], high = spec[3 * k + 1], interior = spec[3 * k + 2];
          if (interior < 0 ||
              od[k] != low + high + in_dims[k] + std::max<int64_t>(in_dims[k] - 1, 0) * interior) {
            return bad("padded size of dimension " + std::to_string(k) + " is wrong");
          }
        }
        break;
      }
      case Opcode::kReverse: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
        if (!hlo::AreDistinctDimensions(d, rank) || od != in_dims)
          return bad("dimensions={...} do not fit");
        break;
      }
      case Opcode::kConcatenate: {
        HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, Ints(inst, "dimensions"));
        if (d.size() != 1 || d[0] < 0 || static_cast<size_t>(d[0]) >= rank || od.size() != rank) {
          return bad("dimensions={...} is not one dimension of the operands");
        }
        int64_t total = 0;
        for (size_t k = 0; k < inst.operands.size(); ++k) {
          const auto& kd = arg(k).shape().dims;
          if (kd.size() != rank || arg(k).type() != out.type()) return bad("operands differ");
          for (size_t j = 0; j < rank; ++j) {
            if (j != static_cast<size_t>(d[0]) && kd[j] != od[j]) return bad("operands differ");
          }
          total += kd[static_cast<size_t>(d[0])];
        }
        if (total != od[static_cast<size_t>(d[0])]) return bad("sizes do not add up");
        break;
      }
      case Opcode::kDynamicSlice:
      case Opcode::kDynamicUpdateSlice: {
        const size_t first = op == Opcode::kDynamicSlice ? 1 : 2;
        if (inst.operands.size() != first + rank) return bad("wants one start index a dimension");
        for (size_t k = first; k < inst.operands.size(); ++k) {
          if (!is_scalar_int(k)) return bad("start indices must be integer scalars");
        }
        const auto& window = op == Opcode::kDynamicSlice ? od : arg(1).shape().dims;
        if (window.size() != rank) return bad("window of another rank");
        for (size_t k = 0; k < rank; ++k) {
          if (window[k] > in_dims[k]) return bad("window larger than the operand");
        }
        if (op == Opcode::kDynamicUpdateSlice &&
            (od != in_dims || arg(1).type() != out.type() || arg(0).type() != out.type())) {
          return bad("the result is not of the operand's shape");
        }
        break;
      }
      default: {  // Elementwise.
        for (size_t k = 0; k < inst.operands.size(); ++k) {
          if (arg(k).size() != out.size() || arg(k).type() != arg(0).type()) {
            return bad("operand " + std::to_string(k) + " is not of the result's shape");
          }
        }
        const bool to_pred = op == Opcode::kIsFinite;
        if (to_pred ? (out.type() != PrimitiveType::kPred || !arg(0).is_float())
                    : arg(0).type() != out.type()) {
          return bad("the result's element type is not the operands'");
        }
        break;
      }
    }
    return Status::Ok();
  }

 private:
  template <typename Fn>
  static void ForEachIndex(const Literal& out, Fn fn) {
    const auto& dims = out.shape().dims;
    if (out.size() == 0) return;
    std::vector<int64_t> idx(dims.size(), 0);
    size_t i = 0;
    do {
      fn(i++, idx);
    } while (Next(idx, dims));
  }

  static void Store(Literal& out, size_t i, double as_float, int64_t as_int) {
    if (out.is_float()) {
      out.SetFloat(i, as_float);
    } else {
      out.SetInt(i, as_int);
    }
  }
  static void CopyElement(const Literal& in, size_t from, Literal& out, size_t to) {
    if (out.is_float()) {
      out.SetFloat(to, in.GetFloat(from));
    } else {
      out.SetInt(to, in.GetInt(from));
    }
  }

  static void Convert(const Literal& in, size_t from, Literal& out, size_t to) {
    const PrimitiveType t = out.type();
    if (out.is_float()) {
      out.SetFloat(to, in.AsDouble(from));
    } else if (t == PrimitiveType::kPred) {
      out.SetInt(to, in.is_float() ? (in.GetFloat(from) != 0) : (in.GetInt(from) != 0));
    } else if (in.is_float()) {
      // NaN to 0, out-of-range values saturate.
      const double v = in.GetFloat(from);
      const auto [lo, hi] = IntRange(t);
      if (std::isnan(v)) {
        out.SetInt(to, 0);
      } else if (v <= lo) {
        out.SetInt(to, IsUnsigned(t) ? 0 : std::numeric_limits<int64_t>::min() >> (64 - Bits(t)));
      } else if (v >= hi) {
        out.SetInt(to, t == PrimitiveType::kU64 ? -1
                       : IsUnsigned(t)          ? static_cast<int64_t>(hi)
                                       : static_cast<int64_t>(std::numeric_limits<int64_t>::max() >>
                                                              (64 - Bits(t))));
      } else {
        const double truncated = std::trunc(v);
        out.SetInt(to, t == PrimitiveType::kU64
                           ? static_cast<int64_t>(static_cast<uint64_t>(truncated))
                           : static_cast<int64_t>(truncated));
      }
    } else {
      out.SetInt(to, in.GetInt(from));  // Two's complement wrap (u64 keeps its bits).
    }
  }

  Status FillConstant(const Instruction& inst, Literal& out) const {
    if (inst.literal_elided) return Unsupported(inst, "elided constants ({...})");
    if (out.is_tuple()) return Unsupported(inst, "tuple constants");
    std::vector<std::string_view> scalars;
    for (uint32_t t = inst.literal.begin; t < inst.literal.end; ++t) {
      const hlo::Token& tok = m_.tokens[t];
      if (tok.kind == hlo::TokenKind::kInt || tok.kind == hlo::TokenKind::kFloat ||
          tok.kind == hlo::TokenKind::kIdent) {
        scalars.push_back(m_.TokenText(tok));
      }
    }
    if (scalars.size() != out.size() && scalars.size() != 1) {
      return Unsupported(inst, "a constant of " + std::to_string(scalars.size()) + " values for " +
                                   std::to_string(out.size()) + " elements");
    }
    for (size_t i = 0; i < out.size(); ++i) {
      const std::string text(scalars.size() == 1 ? scalars[0] : scalars[i]);
      if (text == "true" || text == "false") {
        Store(out, i, text == "true", text == "true");
      } else if (out.is_float()) {
        out.SetFloat(i, std::strtod(text.c_str(), nullptr));
      } else {
        int64_t v = 0;
        uint64_t u = 0;
        if (std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc()) {
          out.SetInt(i, v);
        } else if (std::from_chars(text.data(), text.data() + text.size(), u).ec == std::errc()) {
          out.SetInt(i, static_cast<int64_t>(u));
        } else {
          return Unsupported(inst, "the constant value '" + text + "'");
        }
      }
    }
    return Status::Ok();
  }

  // slice={[start:limit:stride], ...}: the numbers, three a dimension (stride 1 when absent).
 public:
  Result<std::vector<int64_t>> SliceSpec(const Instruction& inst) const {
    const hlo::Attribute* a = inst.FindAttribute("slice");
    if (a == nullptr) return Error(Unsupported(inst, "slice without slice={...}"));
    std::vector<int64_t> out;
    std::vector<int64_t> dim;
    for (uint32_t t = a->value.begin; t < a->value.end; ++t) {
      const hlo::Token& tok = m_.tokens[t];
      if (tok.kind == hlo::TokenKind::kInt) {
        int64_t v = 0;
        std::string_view text = m_.TokenText(tok);
        std::from_chars(text.data(), text.data() + text.size(), v);
        dim.push_back(v);
      } else if (tok.kind == hlo::TokenKind::kRBracket) {
        if (dim.size() == 2) dim.push_back(1);
        if (dim.size() != 3) return Error(Unsupported(inst, "this slice={...} spelling"));
        out.insert(out.end(), dim.begin(), dim.end());
        dim.clear();
      }
    }
    return out;
  }

  // padding=low_high_interior per dimension, joined by 'x'.
  Result<std::vector<int64_t>> PaddingSpec(const Instruction& inst) const {
    const hlo::Attribute* a = inst.FindAttribute("padding");
    if (a == nullptr) return Error(Unsupported(inst, "pad without padding="));
    std::string text;
    for (uint32_t t = a->value.begin; t < a->value.end; ++t) text += m_.TokenText(t);
    std::vector<int64_t> out;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t end = text.find('x', pos);
      if (end == std::string::npos) end = text.size();
      const std::string dim = text.substr(pos, end - pos);
      std::vector<int64_t> parts;
      size_t p = 0;
      while (p <= dim.size()) {
        size_t q = dim.find('_', p);
        if (q == std::string::npos) q = dim.size();
        int64_t v = 0;
        if (std::from_chars(dim.data() + p, dim.data() + q, v).ec != std::errc()) {
          return Error(Unsupported(inst, "padding=" + text));
        }
        parts.push_back(v);
        p = q + 1;
      }
      if (parts.size() == 2) parts.push_back(0);
      if (parts.size() != 3) return Error(Unsupported(inst, "padding=" + text));
      out.insert(out.end(), parts.begin(), parts.end());
      pos = end + 1;
    }
    return out;
  }

 private:
  // The ops that only move elements: slice, reverse, pad, concatenate, dynamic-slice and
  // dynamic-update-slice. Each output element names its source by index arithmetic.
  Status MoveData(const Instruction& inst, const std::vector<Literal>& values, Literal& out) {
    const Literal& in = values[inst.operands[0]];
    const auto& in_dims = in.shape().dims;
    const auto in_strides = hlo::RowMajorStrides(in_dims);
    const size_t rank = in_dims.size();
    const Opcode op = inst.opcode.opcode;
    // Dynamic start indices: clamped so the window stays inside the operand.
    std::vector<int64_t> starts(rank, 0);
    if (op == Opcode::kDynamicSlice || op == Opcode::kDynamicUpdateSlice) {
      const size_t first = op == Opcode::kDynamicSlice ? 1 : 2;
      if (inst.operands.size() != first + rank) {
        return Unsupported(inst, "dynamic slicing with one index operand");
      }
      const auto& window =
          op == Opcode::kDynamicSlice ? out.shape().dims : values[inst.operands[1]].shape().dims;
      for (size_t d = 0; d < rank; ++d) {
        const Literal& s = values[inst.operands[first + d]];
        const int64_t v = s.is_float() ? 0 : s.GetInt(0);
        starts[d] = std::clamp<int64_t>(v, 0, std::max<int64_t>(0, in_dims[d] - window[d]));
      }
    }
    if (op == Opcode::kDynamicUpdateSlice) {
      for (size_t i = 0; i < out.size(); ++i) CopyElement(in, i, out, i);
      const Literal& update = values[inst.operands[1]];
      const auto out_strides = hlo::RowMajorStrides(out.shape().dims);
      ForEachIndex(update, [&](size_t i, const std::vector<int64_t>& idx) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += (idx[d] + starts[d]) * out_strides[d];
        CopyElement(update, i, out, static_cast<size_t>(off));
      });
      return Status::Ok();
    }
    if (op == Opcode::kConcatenate) {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
      if (dims.size() != 1) return Unsupported(inst, "concatenate without one dimension");
      const auto cd = static_cast<size_t>(dims[0]);
      ForEachIndex(out, [&](size_t i, const std::vector<int64_t>& idx) {
        int64_t pos = idx[cd];
        for (int32_t operand_index : inst.operands) {
          const Literal& part = values[operand_index];
          const int64_t extent = part.shape().dims[cd];
          if (pos < extent) {
            std::vector<int64_t> src = idx;
            src[cd] = pos;
            CopyElement(part,
                        static_cast<size_t>(Offset(src, hlo::RowMajorStrides(part.shape().dims))),
                        out, i);
            return;
          }
          pos -= extent;
        }
      });
      return Status::Ok();
    }
    std::vector<int64_t> spec;
    std::vector<bool> reversed(rank, false);
    if (op == Opcode::kSlice) {
      HLOCACHE_ASSIGN_OR_RETURN(spec, SliceSpec(inst));
      if (spec.size() != 3 * rank) return Unsupported(inst, "a slice of another rank");
    } else if (op == Opcode::kPad) {
      HLOCACHE_ASSIGN_OR_RETURN(spec, PaddingSpec(inst));
      if (spec.size() != 3 * rank) return Unsupported(inst, "padding of another rank");
    } else if (op == Opcode::kReverse) {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
      for (int64_t d : dims) reversed[static_cast<size_t>(d)] = true;
    }
    const Literal* pad_value = op == Opcode::kPad ? &values[inst.operands[1]] : nullptr;
    ForEachIndex(out, [&](size_t i, const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t src = idx[d];
        if (op == Opcode::kSlice) {
          src = spec[3 * d] + idx[d] * spec[3 * d + 2];
        } else if (op == Opcode::kPad) {
          // Output position = low + src * (interior + 1); anything else is padding.
          const int64_t rel = idx[d] - spec[3 * d];
          const int64_t step = spec[3 * d + 2] + 1;
          if (rel < 0 || rel % step != 0 || rel / step >= in_dims[d]) {
            CopyElement(*pad_value, 0, out, i);
            return;
          }
          src = rel / step;
        } else if (op == Opcode::kReverse && reversed[d]) {
          src = in_dims[d] - 1 - idx[d];
        } else if (op == Opcode::kDynamicSlice) {
          src = starts[d] + idx[d];
        }
        off += src * in_strides[d];
      }
      CopyElement(in, static_cast<size_t>(off), out, i);
    });
    return Status::Ok();
  }

  Status Compare(const Instruction& inst, const Literal& a, const Literal& b, Literal& out) const {
    const hlo::Attribute* attr = inst.FindAttribute("direction");
    if (attr == nullptr) return Unsupported(inst, "compare without a direction");
    const std::string_view dir = m_.TokenText(attr->value.begin);
    auto test = [&](auto x, auto y) -> int {
      if (dir == "EQ") return x == y;
      if (dir == "NE") return x != y;
      if (dir == "LT") return x < y;
      if (dir == "LE") return x <= y;
      if (dir == "GT") return x > y;
      if (dir == "GE") return x >= y;
      return -1;
    };
    // type=TOTALORDER orders floats by their bits: -NaN < -inf < ... < -0 < +0 < ... < NaN.
    const bool total_order = a.is_float() && AttributeText(inst, "type") == "TOTALORDER";
    for (size_t i = 0; i < out.size(); ++i) {
      int r;
      if (total_order) {
        r = test(TotalOrderKey(a.GetFloat(i)), TotalOrderKey(b.GetFloat(i)));
      } else if (a.is_float()) {
        r = test(a.GetFloat(i), b.GetFloat(i));
      } else if (IsUnsigned(a.type())) {
        r = test(static_cast<uint64_t>(a.GetInt(i)), static_cast<uint64_t>(b.GetInt(i)));
      } else {
        r = test(a.GetInt(i), b.GetInt(i));
      }
      if (r < 0) return Unsupported(inst, "comparison direction " + std::string(dir));
      out.SetInt(i, r);
    }
    return Status::Ok();
  }

  Status Unary(const Instruction& inst, const Literal& a, Literal& out) const {
    const Opcode op = inst.opcode.opcode;
    if (op == Opcode::kIsFinite) {
      for (size_t i = 0; i < out.size(); ++i) out.SetInt(i, std::isfinite(a.GetFloat(i)));
      return Status::Ok();
    }
    if (a.is_float()) {
      std::function<double(double)> f;
      switch (op) {
        case Opcode::kAbs:
          f = [](double x) { return std::fabs(x); };
          break;
        case Opcode::kNegate:
          f = [](double x) { return -x; };
          break;
        case Opcode::kExp:
          f = [](double x) { return std::exp(x); };
          break;
        case Opcode::kExpm1:
          f = [](double x) { return std::expm1(x); };
          break;
        case Opcode::kLog:
          f = [](double x) { return std::log(x); };
          break;
        case Opcode::kLog1p:
          f = [](double x) { return std::log1p(x); };
          break;
        case Opcode::kSqrt:
          f = [](double x) { return std::sqrt(x); };
          break;
        case Opcode::kRsqrt:
          f = [](double x) { return 1.0 / std::sqrt(x); };
          break;
        case Opcode::kTanh:
          f = [](double x) { return std::tanh(x); };
          break;
        case Opcode::kLogistic:
          f = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
          break;
        case Opcode::kCos:
          f = [](double x) { return std::cos(x); };
          break;
        case Opcode::kSin:
          f = [](double x) { return std::sin(x); };
          break;
        case Opcode::kFloor:
          f = [](double x) { return std::floor(x); };
          break;
        case Opcode::kCeil:
          f = [](double x) { return std::ceil(x); };
          break;
        case Opcode::kRoundNearestAfz:
          f = [](double x) { return std::round(x); };
          break;
        case Opcode::kRoundNearestEven:
          f = [](double x) { return std::nearbyint(x); };
          break;
        case Opcode::kSign:
          f = [](double x) { return std::isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x; };
          break;
        default:
          return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on floats");
      }
      // Computed in double, then rounded once to the element type.
      for (size_t i = 0; i < out.size(); ++i) out.SetFloat(i, f(a.GetFloat(i)));
      return Status::Ok();
    }
    const bool pred = a.type() == PrimitiveType::kPred;
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t x = a.GetInt(i);
      const auto ux = static_cast<uint64_t>(x);
      switch (op) {
        case Opcode::kNot:
          out.SetInt(i, pred ? !x : static_cast<int64_t>(~ux));
          break;
        case Opcode::kNegate:
          out.SetInt(i, static_cast<int64_t>(0 - ux));
          break;
        case Opcode::kAbs:
          out.SetInt(i, x < 0 && !IsUnsigned(a.type()) ? static_cast<int64_t>(0 - ux) : x);
          break;
        case Opcode::kSign:
          out.SetInt(i, IsUnsigned(a.type()) ? (x != 0) : (x > 0) - (x < 0));
          break;
        default:
          return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on " +
                                       std::string(hlo::PrimitiveTypeName(a.type())));
      }
    }
    return Status::Ok();
  }

  Status Binary(const Instruction& inst, const Literal& a, const Literal& b, Literal& out) const {
    const Opcode op = inst.opcode.opcode;
    if (a.is_float()) {
      std::function<double(double, double)> f;
      switch (op) {
        case Opcode::kAdd:
          f = [](double x, double y) { return x + y; };
          break;
        case Opcode::kSubtract:
          f = [](double x, double y) { return x - y; };
          break;
        case Opcode::kMultiply:
          f = [](double x, double y) { return x * y; };
          break;
        case Opcode::kDivide:
          f = [](double x, double y) { return x / y; };
          break;
        case Opcode::kRemainder:
          f = [](double x, double y) { return std::fmod(x, y); };
          break;
        case Opcode::kPower:
          f = [](double x, double y) { return std::pow(x, y); };
          break;
        case Opcode::kAtan2:
          f = [](double x, double y) { return std::atan2(x, y); };
          break;
        case Opcode::kMaximum:  // NaN wins, as in XLA.
          f = [](double x, double y) {
            return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
          };
          break;
        case Opcode::kMinimum:
          f = [](double x, double y) {
            return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
          };
          break;
        default:
          return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on floats");
      }
      for (size_t i = 0; i < out.size(); ++i) out.SetFloat(i, f(a.GetFloat(i), b.GetFloat(i)));
      return Status::Ok();
    }
    const PrimitiveType t = a.type();
    const bool is_unsigned = IsUnsigned(t) || t == PrimitiveType::kPred;
    const int bits = std::max(1, Bits(t));
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t x = a.GetInt(i), y = b.GetInt(i);
      const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      const int64_t type_min = is_unsigned ? 0 : std::numeric_limits<int64_t>::min() >> (64 - bits);
      int64_t r = 0;
      switch (op) {
        case Opcode::kAdd:
          r = static_cast<int64_t>(ux + uy);
          break;
        case Opcode::kSubtract:
          r = static_cast<int64_t>(ux - uy);
          break;
        case Opcode::kMultiply:
          r = static_cast<int64_t>(ux * uy);
          break;
        case Opcode::kDivide:  // XLA: x / 0 is all ones; MIN / -1 is MIN.
          if (y == 0) {
            r = -1;
          } else if (is_unsigned) {
            r = static_cast<int64_t>(ux / uy);
          } else if (x == type_min && y == -1) {
            r = x;
          } else {
            r = x / y;
          }
          break;
        case Opcode::kRemainder:  // XLA: x % 0 is x; MIN % -1 is 0.
          if (y == 0) {
            r = x;
          } else if (is_unsigned) {
            r = static_cast<int64_t>(ux % uy);
          } else if (x == type_min && y == -1) {
            r = 0;
          } else {
            r = x % y;
          }
          break;
        case Opcode::kMaximum:
          r = is_unsigned ? (ux > uy ? x : y) : std::max(x, y);
          break;
        case Opcode::kMinimum:
          r = is_unsigned ? (ux < uy ? x : y) : std::min(x, y);
          break;
        case Opcode::kAnd:
          r = x & y;
          break;
        case Opcode::kOr:
          r = x | y;
          break;
        case Opcode::kXor:
          r = x ^ y;
          break;
        case Opcode::kShiftLeft:
          r = (uy >= static_cast<uint64_t>(bits)) ? 0 : static_cast<int64_t>(ux << uy);
          break;
        case Opcode::kShiftRightLogical: {
          const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
          r = (uy >= static_cast<uint64_t>(bits)) ? 0 : static_cast<int64_t>((ux & mask) >> uy);
          break;
        }
        case Opcode::kShiftRightArithmetic: {
          // The value's own sign bit fills in, whatever the type's signedness.
          const int64_t sx =
              bits == 64 ? x : static_cast<int64_t>(ux << (64 - bits)) >> (64 - bits);
          r = sx >> std::min<uint64_t>(uy, 63);
          break;
        }
        case Opcode::kPower: {
          if (y < 0 && !is_unsigned) {
            r = x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
            break;
          }
          uint64_t base = ux, e = uy, acc = 1;
          while (e != 0) {
            if (e & 1) acc *= base;
            base *= base;
            e >>= 1;
          }
          r = static_cast<int64_t>(acc);
          break;
        }
        default:
          return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on " +
                                       std::string(hlo::PrimitiveTypeName(t)));
      }
      out.SetInt(i, r);
    }
    return Status::Ok();
  }

  // reduce(operands..., inits...), dimensions={...}, to_apply=f: each output element folds, in
  // row-major order of the reduced dimensions, f over the inputs starting from the inits.
  Status Reduce(const Instruction& inst, std::vector<Literal>& values, Literal& out) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
    if (inst.callees.size() != 1 || inst.operands.size() % 2 != 0) {
      return Unsupported(inst, "this form of reduce");
    }
    const size_t n = inst.operands.size() / 2;
    const Literal& first = values[inst.operands[0]];
    const auto& in_dims = first.shape().dims;
    std::vector<bool> reduced(in_dims.size(), false);
    for (int64_t d : dims) {
      if (d < 0 || static_cast<size_t>(d) >= in_dims.size()) return Unsupported(inst, "bad dims");
      reduced[static_cast<size_t>(d)] = true;
    }
    std::vector<int64_t> kept_dims, red_dims;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      (reduced[d] ? red_dims : kept_dims).push_back(in_dims[d]);
    }
    Literal* outs[64];
    if (n > 64) return Unsupported(inst, "reduce of more than 64 operands");
    for (size_t k = 0; k < n; ++k) outs[k] = n == 1 ? &out : &out.elements()[k];
    const auto strides = hlo::RowMajorStrides(in_dims);
    bool swapped = false;
    const Literal& init = values[inst.operands[n]];
    if (n == 1 && first.size() > 0 && out.size() > 0 && init.type() == first.type() &&
        out.type() == first.type()) {
      if (const Instruction* op = OneBinaryOp(inst.callees[0], first.type(), swapped)) {
        return ReduceAllAtOnce(*op, swapped, first, init, reduced, strides, out);
      }
    }
    std::vector<int64_t> kept(kept_dims.size(), 0);
    size_t out_i = 0;
    bool more_out = true;
    while (more_out) {
      std::vector<Literal> acc;
      for (size_t k = 0; k < n; ++k) acc.push_back(values[inst.operands[n + k]]);
      std::vector<int64_t> red(red_dims.size(), 0);
      bool more_red =
          std::all_of(red_dims.begin(), red_dims.end(), [](int64_t d) { return d > 0; });
      while (more_red) {
        std::vector<int64_t> full(in_dims.size());
        for (size_t d = 0, ki = 0, ri = 0; d < in_dims.size(); ++d) {
          full[d] = reduced[d] ? red[ri++] : kept[ki++];
        }
        const auto off = static_cast<size_t>(Offset(full, strides));
        std::vector<Literal> call_args = acc;
        for (size_t k = 0; k < n; ++k) {
          const Literal& in = values[inst.operands[k]];
          Literal x(acc[k].shape());
          CopyElement(in, off, x, 0);
          call_args.push_back(std::move(x));
        }
        HLOCACHE_ASSIGN_OR_RETURN(Literal r, Call(inst.callees[0], call_args));
        if (n == 1) {
          acc[0] = std::move(r);
        } else {
          for (size_t k = 0; k < n; ++k) acc[k] = r.elements()[k];
        }
        more_red = !red_dims.empty() && Next(red, red_dims);
      }
      if (outs[0]->size() > 0) {
        for (size_t k = 0; k < n; ++k) CopyElement(acc[k], 0, *outs[k], out_i);
      }
      ++out_i;
      more_out = !kept_dims.empty() && out_i < outs[0]->size() && Next(kept, kept_dims);
    }
    return Status::Ok();
  }

  // The root of computation `c` when it is nothing but one associative binary op on its two
  // scalar parameters of type `t` (the usual add, max, min ... reducer); null otherwise.
  // `swapped`: the op takes the second parameter (the element) first.
  const Instruction* OneBinaryOp(int32_t c, PrimitiveType t, bool& swapped) const {
    const Computation& comp = m_.computations[static_cast<size_t>(c)];
    if (comp.instructions.size() != 3 || comp.parameters.size() != 2 || comp.root < 0) {
      return nullptr;
    }
    const Instruction& root = comp.instructions[static_cast<size_t>(comp.root)];
    switch (root.opcode.opcode) {
      case Opcode::kAdd:
      case Opcode::kMultiply:
      case Opcode::kMaximum:
      case Opcode::kMinimum:
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor:
        break;
      default:
        return nullptr;
    }
    if (root.opcode.phase != hlo::AsyncPhase::kNone || root.operands.size() != 2) return nullptr;
    const int32_t acc = comp.parameters[0], elem = comp.parameters[1];
    if (root.operands[0] == acc && root.operands[1] == elem) {
      swapped = false;
    } else if (root.operands[0] == elem && root.operands[1] == acc) {
      swapped = true;
    } else {
      return nullptr;
    }
    for (const Instruction& inst : comp.instructions) {
      if (!inst.has_shape() || inst.shape.type != t || inst.shape.IsTuple() ||
          !inst.shape.dims.empty()) {
        return nullptr;
      }
    }
    return &root;
  }

  // reduce with a one-op reducer (see OneBinaryOp), over all results at once: one pass of
  // the op per step of the reduced dimensions, in their row-major order. Each result goes
  // through the same steps as under the definition, one element at a time.
  Status ReduceAllAtOnce(const Instruction& op, bool swapped, const Literal& in,
                         const Literal& init, const std::vector<bool>& reduced,
                         const std::vector<int64_t>& strides, Literal& out) const {
    const auto& in_dims = in.shape().dims;
    std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      (reduced[d] ? red_dims : kept_dims).push_back(in_dims[d]);
      (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
    }
    std::vector<size_t> kept_offsets;
    kept_offsets.reserve(out.size());
    std::vector<int64_t> kept(kept_dims.size(), 0);
    do {
      kept_offsets.push_back(static_cast<size_t>(Offset(kept, kept_strides)));
    } while (!kept.empty() && Next(kept, kept_dims));
    if (kept_offsets.size() != out.size()) return Unsupported(op, "this reduce's shapes");
    Shape row;
    row.type = out.type();
    row.dims = {static_cast<int64_t>(out.size())};
    Literal acc(row), next(row), elements(row);
    for (size_t j = 0; j < acc.size(); ++j) CopyElement(init, 0, acc, j);
    std::vector<int64_t> red(red_dims.size(), 0);
    do {
      const auto red_offset = static_cast<size_t>(Offset(red, red_strides));
      for (size_t j = 0; j < elements.size(); ++j) {
        CopyElement(in, kept_offsets[j] + red_offset, elements, j);
      }
      HLOCACHE_RETURN_IF_ERROR(swapped ? Binary(op, elements, acc, next)
                                       : Binary(op, acc, elements, next));
      std::swap(acc, next);
    } while (!red.empty() && Next(red, red_dims));
    for (size_t j = 0; j < out.size(); ++j) CopyElement(acc, j, out, j);
    return Status::Ok();
  }

  // dot: output dims are the batch dims, then lhs's free dims, then rhs's free dims. Each
  // result element sums its products in row-major order of the contracting dimensions,
  // starting from zero. The loops run over a dense copy of one batch of rhs, with a row of
  // results accumulated at once, so that the innermost loop walks memory in order: the sums
  // and their order are those of the one-element-at-a-time definition.
  Status Dot(const Instruction& inst, const Literal& lhs, const Literal& rhs, Literal& out) const {
    const auto lb = IntsOrEmpty(inst, "lhs_batch_dims"), rb = IntsOrEmpty(inst, "rhs_batch_dims");
    const auto lc = IntsOrEmpty(inst, "lhs_contracting_dims");
    const auto rc = IntsOrEmpty(inst, "rhs_contracting_dims");
    if (lb.size() != rb.size() || lc.size() != rc.size()) return Unsupported(inst, "this dot");
    const auto& ld = lhs.shape().dims;
    const auto& rd = rhs.shape().dims;
    auto free_dims = [](size_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
      std::vector<int64_t> f;
      for (size_t d = 0; d < rank; ++d) {
        if (std::find(a.begin(), a.end(), static_cast<int64_t>(d)) == a.end() &&
            std::find(b.begin(), b.end(), static_cast<int64_t>(d)) == b.end()) {
          f.push_back(static_cast<int64_t>(d));
        }
      }
      return f;
    };
    const auto lf = free_dims(ld.size(), lb, lc), rf = free_dims(rd.size(), rb, rc);
    const auto ls = hlo::RowMajorStrides(ld), rs = hlo::RowMajorStrides(rd);
    // The offsets, in row-major order, of every index over the dimensions `group` of an
    // operand with dimensions `dims` and strides `strides`.
    auto offsets = [](const std::vector<int64_t>& group, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& strides) {
      std::vector<int64_t> sizes;
      for (int64_t d : group) sizes.push_back(dims[static_cast<size_t>(d)]);
      std::vector<size_t> result;
      if (std::any_of(sizes.begin(), sizes.end(), [](int64_t n) { return n <= 0; })) {
        return result;
      }
      std::vector<int64_t> index(sizes.size(), 0);
      do {
        int64_t off = 0;
        for (size_t j = 0; j < index.size(); ++j) {
          off += index[j] * strides[static_cast<size_t>(group[j])];
        }
        result.push_back(static_cast<size_t>(off));
      } while (!index.empty() && Next(index, sizes));
      return result;
    };
    const auto l_batch = offsets(lb, ld, ls), r_batch = offsets(rb, rd, rs);
    const auto l_free = offsets(lf, ld, ls), r_free = offsets(rf, rd, rs);
    const auto l_con = offsets(lc, ld, ls), r_con = offsets(rc, rd, rs);
    if (l_batch.size() != r_batch.size() || l_con.size() != r_con.size() ||
        l_batch.size() * l_free.size() * r_free.size() != out.size()) {
      return Unsupported(inst, "this dot's shapes");
    }
    if (out.is_float()) {
      // An integer operand's elements are first converted to the result's type.
      const PrimitiveType t = out.type();
      auto as_result = [t](const Literal& l, size_t i) {
        return l.is_float() ? l.AsDouble(i) : RoundToType(l.AsDouble(i), t);
      };
      DotRows<double>(
          l_batch, l_free, l_con, r_batch, r_free, r_con, out,
          [&](size_t i) { return as_result(lhs, i); }, [&](size_t i) { return as_result(rhs, i); });
    } else {
      // Integers wrap: the products and sums are taken modulo 2^64, then to the result type.
      DotRows<uint64_t>(
          l_batch, l_free, l_con, r_batch, r_free, r_con, out,
          [&](size_t i) { return static_cast<uint64_t>(lhs.GetInt(i)); },
          [&](size_t i) { return static_cast<uint64_t>(rhs.GetInt(i)); });
    }
    return Status::Ok();
  }

  template <typename Acc, typename LhsAt, typename RhsAt>
  static void DotRows(const std::vector<size_t>& l_batch, const std::vector<size_t>& l_free,
                      const std::vector<size_t>& l_con, const std::vector<size_t>& r_batch,
                      const std::vector<size_t>& r_free, const std::vector<size_t>& r_con,
                      Literal& out, LhsAt lhs_at, RhsAt rhs_at) {
    const size_t m_size = l_free.size(), n_size = r_free.size(), k_size = l_con.size();
    // Rows of results are computed kRows at a time, each load of rhs serving all of them.
    constexpr size_t kRows = 4;
    std::vector<Acc> rhs_dense(k_size * n_size), lhs_rows(kRows * k_size), acc(kRows * n_size);
    size_t i = 0;
    for (size_t b = 0; b < l_batch.size(); ++b) {
      for (size_t k = 0; k < k_size; ++k) {
        for (size_t n = 0; n < n_size; ++n) {
          rhs_dense[k * n_size + n] = rhs_at(r_batch[b] + r_con[k] + r_free[n]);
        }
      }
      for (size_t m0 = 0; m0 < m_size; m0 += kRows) {
        const size_t rows = std::min(kRows, m_size - m0);
        for (size_t r = 0; r < kRows; ++r) {
          for (size_t k = 0; k < k_size; ++k) {
            // Rows past the end multiply zeros; their results are not stored.
            lhs_rows[r * k_size + k] =
                r < rows ? lhs_at(l_batch[b] + l_free[m0 + r] + l_con[k]) : Acc{0};
          }
        }
        std::fill(acc.begin(), acc.end(), Acc{0});
        Acc* __restrict a0 = acc.data();
        Acc* __restrict a1 = a0 + n_size;
        Acc* __restrict a2 = a1 + n_size;
        Acc* __restrict a3 = a2 + n_size;
        for (size_t k = 0; k < k_size; ++k) {
          const Acc x0 = lhs_rows[k], x1 = lhs_rows[k_size + k];
          const Acc x2 = lhs_rows[2 * k_size + k], x3 = lhs_rows[3 * k_size + k];
          const Acc* __restrict row = rhs_dense.data() + k * n_size;
          auto step = [&](size_t n) {
            const Acc y = row[n];
            a0[n] += x0 * y;
            a1[n] += x1 * y;
            a2[n] += x2 * y;
            a3[n] += x3 * y;
          };
          // Fixed-size blocks, which the compiler turns into vector instructions at -O2.
          constexpr size_t kBlock = 8;
          size_t n = 0;
          for (; n + kBlock <= n_size; n += kBlock) {
            for (size_t j = 0; j < kBlock; ++j) step(n + j);
          }
          for (; n < n_size; ++n) step(n);
        }
        for (size_t r = 0; r < rows; ++r) {
          for (size_t n = 0; n < n_size; ++n, ++i) {
            if constexpr (std::is_floating_point_v<Acc>) {
              out.SetFloat(i, acc[r * n_size + n]);
            } else {
              out.SetInt(i, static_cast<int64_t>(acc[r * n_size + n]));
            }
          }
        }
      }
    }
  }

  const hlo::Module& m_;
  HostTransfers* host_;                // Borrowed; may be null.
  const Computation* comp_ = nullptr;  // The computation Call is evaluating.
};

}  // namespace

Result<Literal> Evaluate(const hlo::Module& module, std::span<const Literal> arguments) {
  return Evaluate(module, arguments, nullptr);
}

Result<Literal> Evaluate(const hlo::Module& module, std::span<const Literal> arguments,
                         HostTransfers* host) {
  if (module.entry < 0) return Error(InvalidArgument(module.filename() + ": no entry computation"));
  const Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  if (arguments.size() != entry.parameters.size()) {
    return Error(InvalidArgument("the entry computation takes " +
                                 std::to_string(entry.parameters.size()) + " arguments, got " +
                                 std::to_string(arguments.size())));
  }
  for (size_t p = 0; p < arguments.size(); ++p) {
    const Shape& want = entry.instructions[static_cast<size_t>(entry.parameters[p])].shape;
    const Shape& got = arguments[p].shape();
    if (hlo::HasDynamicLeaf(want) ? !Admits(want, got) : !hlo::SameValues(want, got)) {
      return Error(InvalidArgument("argument " + std::to_string(p) + " is " +
                                   hlo::CanonicalShapeText(got) + ", the parameter is " +
                                   hlo::CanonicalShapeText(want)));
    }
  }
  return Evaluator(module, host).Call(module.entry, arguments);
}

Result<Literal> ConstantValue(const hlo::Module& module, const hlo::Instruction& constant) {
  if (constant.opcode.opcode != Opcode::kConstant) {
    return Error(InvalidArgument("'" + std::string(constant.name) + "' is not a constant"));
  }
  return Evaluator(module).Constant(constant);
}

Status CheckShapes(const hlo::Module& module, const hlo::Instruction& inst,
                   std::span<const hlo::Shape* const> operand_shapes) {
  if (IsExtendedOp(inst.opcode.opcode)) {
    return CheckExtendedShapes(ShapeContext(module), inst, operand_shapes);
  }
  HLOCACHE_RETURN_IF_ERROR(OperandCountStatus(module, inst));
  std::vector<ShapeView> operands;
  for (const hlo::Shape* s : operand_shapes) operands.emplace_back(*s);
  return Evaluator(module).CheckShapes(inst, operands, ShapeView(inst.shape));
}

Status CheckDotShapes(const hlo::Module& module, const hlo::Instruction& inst,
                      const hlo::Shape& lhs, const hlo::Shape& rhs) {
  if (!lhs.IsArray() || !rhs.IsArray() || !inst.shape.IsArray()) {
    return InvalidArgument(module.filename() + ":" + std::to_string(module.LineOf(inst.offset)) +
                           ": '" + std::string(inst.name) + "' takes and returns arrays");
  }
  return Evaluator(module).CheckDot(inst, ShapeView(lhs), ShapeView(rhs), ShapeView(inst.shape));
}

Result<Literal> EvaluateDot(const hlo::Module& module, const hlo::Instruction& inst,
                            const Literal& lhs, const Literal& rhs) {
  Literal out(inst.shape);
  HLOCACHE_RETURN_IF_ERROR(Evaluator(module).DotOf(inst, lhs, rhs, out));
  return out;
}

Result<std::vector<int64_t>> SliceSpec(const hlo::Module& module, const hlo::Instruction& slice) {
  return Evaluator(module).SliceSpec(slice);
}

Result<std::vector<int64_t>> PaddingSpec(const hlo::Module& module, const hlo::Instruction& pad) {
  return Evaluator(module).PaddingSpec(pad);
}

bool IsSupportedOp(hlo::Opcode op) { return IsCoreOp(op) || IsExtendedOp(op); }

Status CheckOperandCount(const hlo::Module& module, const hlo::Instruction& inst) {
  return OperandCountStatus(module, inst);
}

}  // namespace hlocache::interp
