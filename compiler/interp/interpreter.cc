#include "compiler/interp/interpreter.h"

#include "compiler/interp/evaluator.h"
#include "compiler/semantics/retained_memory.h"

namespace hlocache::interp {

using hlo::Computation;
using hlo::Opcode;
using hlo::Shape;
using internal::Evaluator;

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
  // Values' buffers are freed and allocated again instruction after instruction: kept for
  // reuse while this runs (retained_memory.h).
  const RetainScope retain;
  return Evaluator(module, host).Call(module.entry, arguments);
}

Result<Literal> EvaluateDot(const hlo::Module& module, const hlo::Instruction& inst,
                            const Literal& lhs, const Literal& rhs) {
  Literal out(inst.shape);
  HLOCACHE_RETURN_IF_ERROR(Evaluator(module).DotOf(inst, lhs, rhs, out));
  return out;
}

bool IsSupportedOp(hlo::Opcode op) { return IsCoreOp(op) || IsExtendedOp(op); }

}  // namespace hlocache::interp
