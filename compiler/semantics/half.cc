#include "compiler/semantics/half.h"

#include <bit>

namespace hlocache::interp {
namespace {
HLOCACHE_HALF_CODE
}  // namespace

uint16_t EncodeHalf(double v, HalfFormat f) {
  return hc_half_from_double_bits(std::bit_cast<uint64_t>(v), f.exponent_bits, f.mantissa_bits);
}

double DecodeHalf(uint16_t bits, HalfFormat f) {
  return std::bit_cast<double>(hc_double_bits_from_half(bits, f.exponent_bits, f.mantissa_bits));
}

}  // namespace hlocache::interp
