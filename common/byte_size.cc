#include "common/byte_size.h"

#include <cstdint>
#include <string>

namespace hlocache {

Result<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return Error(InvalidArgument("size too large"));
    value = value * 10 + digit;
  }
  if (i == 0) return Error(InvalidArgument("size '" + std::string(text) + "' is not a number"));
  std::string_view unit = text.substr(i);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  if (!unit.empty() && unit.back() == 'i') unit.remove_suffix(1);
  int shift = 0;
  if (unit.size() == 1) {
    switch (unit[0] | 0x20) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      default:
        return Error(
            InvalidArgument("unknown size unit in '" + std::string(text) + "' (use K, M, G or T)"));
    }
  } else if (!unit.empty()) {
    return Error(
        InvalidArgument("unknown size unit in '" + std::string(text) + "' (use K, M, G or T)"));
  }
  if (shift && value > (UINT64_MAX >> shift)) return Error(InvalidArgument("size too large"));
  return value << shift;
}

}  // namespace hlocache
