#include "compiler/semantics/signature.h"

namespace hlocache::interp {

Status CheckSignature(const ShapeContext& ctx, const hlo::Instruction& inst, int32_t callee,
                      std::span<const hlo::Shape* const> params, const hlo::Shape& result,
                      const std::string& role) {
  const hlo::Module& m = ctx.module();
  if (callee < 0 || static_cast<size_t>(callee) >= m.computations.size()) {
    return ctx.Malformed(inst, role + " is not a computation of the module");
  }
  const hlo::Computation& c = m.computations[static_cast<size_t>(callee)];
  const auto count = static_cast<int32_t>(c.instructions.size());
  if (c.root < 0 || c.root >= count) return ctx.Malformed(inst, role + " has no root");
  if (c.parameters.size() != params.size()) {
    return ctx.Malformed(inst, role + " ('" + std::string(c.name) + "') takes " +
                                   std::to_string(c.parameters.size()) + " parameters, not " +
                                   std::to_string(params.size()));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const int32_t p = c.parameters[k];
    if (p < 0 || p >= count)
      return ctx.Malformed(inst, role + " lacks parameter " + std::to_string(k));
    const hlo::Shape& declared = c.instructions[static_cast<size_t>(p)].shape;
    if (!hlo::SameValues(declared, *params[k])) {
      return ctx.Malformed(inst, role + "'s parameter " + std::to_string(k) + " is " +
                                     hlo::CanonicalShapeText(declared) + ", but it is passed " +
                                     hlo::CanonicalShapeText(*params[k]));
    }
  }
  const hlo::Shape& root = c.instructions[static_cast<size_t>(c.root)].shape;
  if (!hlo::SameValues(root, result)) {
    return ctx.Malformed(inst, role + " returns " + hlo::CanonicalShapeText(root) + ", not " +
                                   hlo::CanonicalShapeText(result));
  }
  return Status::Ok();
}

hlo::Shape ArrayShape(hlo::PrimitiveType type, hlo::Dims dims) {
  hlo::Shape s;
  s.type = type;
  s.dims = std::move(dims);
  return s;
}

}  // namespace hlocache::interp
