#include "compiler/hlo/literal_text.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>

namespace hlocache::hlo {
namespace {

std::optional<double> ParseDouble(std::string_view text) {
  if (text == "inf") return INFINITY;
  if (text == "-inf") return -INFINITY;
  if (text == "nan") return std::nan("");
  if (text == "-nan") return -std::nan("");
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Beyond double range: let strtod decide between inf and a denormal/zero.
    std::string copy(text);
    return std::strtod(copy.c_str(), nullptr);
  }
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

// Round-to-nearest-even from float to bfloat16, returned as the float it denotes.
float RoundToBf16(float f) {
  if (std::isnan(f)) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  uint32_t lsb = (bits >> 16) & 1;
  bits += 0x7fff + lsb;
  bits &= 0xffff0000u;
  return std::bit_cast<float>(bits);
}

// Round-to-nearest-even from double to IEEE binary16, returned as the double it denotes. Done in
// double arithmetic: dividing by a power of two is exact, so nearbyint() rounds exactly once.
double RoundToF16(double v) {
  if (std::isnan(v) || std::isinf(v)) return v;
  const double a = std::fabs(v);
  if (a >= 65520.0) return std::copysign(INFINITY, v);  // Past the last rounding boundary.
  int exp = 0;
  std::frexp(a, &exp);                           // a = m * 2^exp, m in [0.5, 1).
  const int step_exp = std::max(exp - 11, -24);  // 10 fraction bits; subnormals step 2^-24.
  const double step = std::ldexp(1.0, step_exp);
  return std::copysign(std::nearbyint(a / step) * step, v);
}

void AppendFloat(double v, std::string& out) {
  if (std::isnan(v)) {
    out += std::signbit(v) ? "-nan" : "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(p - buf));
}

void AppendFloat32(float v, std::string& out) {
  if (std::isnan(v) || std::isinf(v)) {
    AppendFloat(v, out);
    return;
  }
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(p - buf));
}

bool AppendInteger(std::string_view text, bool is_signed, std::string& out) {
  int base = 10;
  std::string_view digits = text;
  bool negative = false;
  if (digits.starts_with('-')) {
    negative = true;
    digits.remove_prefix(1);
  }
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  uint64_t magnitude = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) return false;
  if (negative && !is_signed && magnitude != 0) return false;
  if (negative && magnitude != 0) out += '-';
  char buf[32];
  auto [q, ec2] = std::to_chars(buf, buf + sizeof buf, magnitude);
  out.append(buf, static_cast<size_t>(q - buf));
  return true;
}

}  // namespace

void AppendCanonicalElement(std::string_view text, TokenKind kind, PrimitiveType type,
                            std::string& out) {
  if (type == PrimitiveType::kPred) {
    if (text == "true" || text == "1") {
      out += "true";
      return;
    }
    if (text == "false" || text == "0") {
      out += "false";
      return;
    }
    out += text;
    return;
  }
  if (IsSignedInt(type) || IsUnsignedInt(type)) {
    if (kind != TokenKind::kInt || !AppendInteger(text, IsSignedInt(type), out)) out += text;
    return;
  }
  if (IsFloat(type) || IsComplex(type)) {
    std::optional<double> v = ParseDouble(text);
    if (!v) {
      out += text;
      return;
    }
    switch (type) {
      case PrimitiveType::kF32:
      case PrimitiveType::kC64:
        AppendFloat32(static_cast<float>(*v), out);
        return;
      case PrimitiveType::kBF16:
        AppendFloat32(RoundToBf16(static_cast<float>(*v)), out);
        return;
      case PrimitiveType::kF16:
        AppendFloat32(static_cast<float>(RoundToF16(*v)), out);
        return;
      default:
        // f64, c128, and the f8/f6/f4 types (their exact rounding is left to the compiler; the
        // shortest double still unifies the spellings of one value).
        AppendFloat(*v, out);
        return;
    }
  }
  AppendCanonicalNumber(text, kind, out);
}

void AppendCanonicalNumber(std::string_view text, TokenKind kind, std::string& out) {
  if (kind == TokenKind::kInt) {
    const size_t before = out.size();
    if (!AppendInteger(text, /*is_signed=*/true, out)) {
      out += text;
    } else if (text.starts_with('-') && out.compare(before, std::string::npos, "0") == 0) {
      // A float -0.0 prints as -0, which the next round reads as an integer: it keeps its sign
      // there too, or the canonical text would not be a fixed point (fuzzer finding).
      out.insert(before, 1, '-');
    }
    return;
  }
  if (kind == TokenKind::kFloat) {
    std::optional<double> v = ParseDouble(text);
    if (v) {
      AppendFloat(*v, out);
    } else {
      out += text;
    }
    return;
  }
  out += text;
}

}  // namespace hlocache::hlo
