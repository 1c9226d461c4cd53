// The shape rules of tokens, add-dependency, opt-barrier, domain, copy-start/-done and async-
// start/-update/-done; their evaluation is compiler/interp/eval_wrappers.cc.
#include <string>

#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Takes(Opcode op) {
  switch (op) {
    case Opcode::kAfterAll:
    case Opcode::kAddDependency:
    case Opcode::kOptimizationBarrier:
    case Opcode::kDomain:
    case Opcode::kCopyStart:
    case Opcode::kCopyDone:
    case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone:
      return true;
    default:
      return false;
  }
}

// The tuple of the operands' shapes, which async-start returns as its element 0.
Shape TupleOf(std::span<const Shape* const> shapes) {
  Shape t;
  for (const Shape* s : shapes) t.tuple_elements.push_back(*s);
  return t;
}

// The operand of copy-done, async-update and async-done is what a -start returns, a tuple of at
// least two elements; -done returns its element 1, async-update the tuple itself.
Status CheckStarted(const ShapeContext& ctx, const Instruction& inst,
                    std::span<const Shape* const> operands) {
  if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand, the started value");
  const Shape& started = *operands[0];
  if (!started.IsTuple() || started.tuple_elements.size() < 2) {
    return ctx.Malformed(inst, "the operand " + hlo::CanonicalShapeText(started) +
                                   " is not the tuple a -start returns");
  }
  const Opcode op = inst.opcode.opcode;
  const Shape& want = op == Opcode::kAsyncUpdate ? started : started.tuple_elements[1];
  if (!hlo::SameValues(inst.shape, want)) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) + " is not " +
                                   hlo::CanonicalShapeText(want));
  }
  return Status::Ok();
}

Status CheckAsyncStart(const ShapeContext& ctx, const Instruction& inst,
                       std::span<const Shape* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "calls"));
  const hlo::Computation& c = ctx.module().computations[static_cast<size_t>(f)];
  if (c.root < 0 || static_cast<size_t>(c.root) >= c.instructions.size()) {
    return ctx.Malformed(inst, "the wrapped computation has no root");
  }
  const Shape& result = c.instructions[static_cast<size_t>(c.root)].shape;
  HLOCACHE_RETURN_IF_ERROR(
      CheckSignature(ctx, inst, f, operands, result, "the wrapped computation"));
  const Shape& s = inst.shape;
  if (!s.IsTuple() || s.tuple_elements.size() < 2 ||
      !hlo::SameValues(s.tuple_elements[0], TupleOf(operands)) ||
      !hlo::SameValues(s.tuple_elements[1], result)) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(s) +
                                   " is not ((operands...), the wrapped computation's result, "
                                   "contexts...)");
  }
  return Status::Ok();
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Opcode op = inst.opcode.opcode;
  const Shape token = ArrayShape(PrimitiveType::kToken);
  switch (op) {
    case Opcode::kAfterAll:
      for (size_t k = 0; k < operands.size(); ++k) {
        if (!hlo::SameValues(*operands[k], token)) {
          return ctx.Malformed(inst, "operand " + std::to_string(k) + " is not a token");
        }
      }
      if (!hlo::SameValues(inst.shape, token))
        return ctx.Malformed(inst, "the result is not token[]");
      return Status::Ok();
    case Opcode::kAddDependency:
      if (operands.size() != 2) {
        return ctx.Malformed(inst, "takes two operands, a value and a token");
      }
      break;
    case Opcode::kOptimizationBarrier:
    case Opcode::kDomain:
      if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand");
      break;
    case Opcode::kCopyStart: {
      if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand");
      Shape want;
      want.tuple_elements = {*operands[0], *operands[0], ArrayShape(PrimitiveType::kU32)};
      if (!hlo::SameValues(inst.shape, want)) {
        return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                       " is not " + hlo::CanonicalShapeText(want));
      }
      return Status::Ok();
    }
    case Opcode::kCopyDone:
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone:
      return CheckStarted(ctx, inst, operands);
    default:
      return CheckAsyncStart(ctx, inst, operands);
  }
  // The ops that return their operand 0.
  if (!hlo::SameValues(inst.shape, *operands[0])) {
    return ctx.Malformed(inst, "the result " + hlo::CanonicalShapeText(inst.shape) +
                                   " is not the operand's shape " +
                                   hlo::CanonicalShapeText(*operands[0]));
  }
  return Status::Ok();
}

}  // namespace

ShapeRules WrapperRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
