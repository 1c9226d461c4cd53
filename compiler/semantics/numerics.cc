#include "compiler/semantics/numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "compiler/semantics/minifloat.h"

namespace hlocache::interp {

using hlo::PrimitiveType;

namespace {

// A float type's precision (significand bits, the leading one included) and its smallest
// normal exponent: what the spacing of its values at a given magnitude follows from.
struct Precision {
  int digits;
  int min_exponent;
};

std::optional<Precision> PrecisionOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF64:
      return Precision{53, -1022};
    case PrimitiveType::kF32:
      return Precision{24, -126};
    case PrimitiveType::kF16:
      return Precision{11, -14};
    case PrimitiveType::kBF16:
      return Precision{8, -126};
    default:
      break;
  }
  if (const auto mini = MiniFloatFormatOf(type)) {
    return Precision{mini->mantissa_bits + 1, 1 - mini->bias};
  }
  return std::nullopt;
}

}  // namespace

double UlpBound(hlo::Opcode op, PrimitiveType type) {
  const std::string_view name = hlo::OpcodeName(op);
  for (const StatedBound& b : StatedBounds()) {
    if (name != b.op) continue;
    switch (type) {
      case PrimitiveType::kF64:
        return b.f64;
      case PrimitiveType::kF32:
        return b.f32;
      case PrimitiveType::kF16:
        return b.f16;
      case PrimitiveType::kBF16:
        return b.bf16;
      default:
        return 0;
    }
  }
  return 0;
}

bool Reassociates(hlo::Opcode op, PrimitiveType type) {
  const std::string_view name = hlo::OpcodeName(op), type_name = hlo::PrimitiveTypeName(type);
  for (const StatedReassociation& r : StatedReassociations()) {
    if (name == r.op && type_name == r.type) return true;
  }
  return false;
}

bool HasInexactOps(const hlo::Module& module) {
  for (const hlo::Computation& c : module.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      if (UlpBound(inst.opcode.opcode, inst.shape.type) > 0) return true;
      if (inst.operands.empty()) continue;
      const hlo::Instruction& first = c.instructions[static_cast<size_t>(inst.operands[0])];
      if (first.shape.IsArray() && Reassociates(inst.opcode.opcode, first.shape.type)) return true;
    }
  }
  return false;
}

double UlpDistance(double got, double want, PrimitiveType type) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : kInfinity;
  if (got == want) return 0;
  if (std::isinf(got) || std::isinf(want)) return kInfinity;
  const auto precision = PrecisionOf(type);
  if (!precision) return kInfinity;  // Not a float type: values are equal or not.
  int exponent = 0;
  std::frexp(want, &exponent);  // |want| in [2^(exponent-1), 2^exponent).
  const int scale = std::max(exponent - 1, precision->min_exponent);
  return std::fabs(got - want) / std::ldexp(1.0, scale - precision->digits + 1);
}

bool WithinModuleTolerance(double got, double want, double scale) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  const ModuleTolerance t = StatedModuleTolerance();
  return std::fabs(got - want) <=
         std::max(t.absolute, t.relative * std::max(std::fabs(want), scale));
}

}  // namespace hlocache::interp
