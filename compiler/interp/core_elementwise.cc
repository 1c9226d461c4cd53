// The core elementwise ops: compare, the unary and binary arithmetic, with XLA's integer, NaN and
// conversion semantics.
#include "compiler/interp/evaluator.h"

namespace hlocache::interp::internal {

void Evaluator::Convert(const Literal& in, size_t from, Literal& out, size_t to) {
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

Status Evaluator::Compare(const Instruction& inst, const Literal& a, const Literal& b,
                          Literal& out) const {
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

Status Evaluator::Unary(const Instruction& inst, const Literal& a, Literal& out) const {
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

namespace {

// `f` on each pair of elements, into `out`: the op is chosen once per array, not per element
// (the interpreter spends most of its time in loops like this one on large modules).
template <typename F>
void EachFloatPair(const Literal& a, const Literal& b, Literal& out, F f) {
  for (size_t i = 0; i < out.size(); ++i) out.SetFloat(i, f(a.GetFloat(i), b.GetFloat(i)));
}

template <typename F>
void EachIntegerPair(const Literal& a, const Literal& b, Literal& out, F f) {
  for (size_t i = 0; i < out.size(); ++i) out.SetInt(i, f(a.GetInt(i), b.GetInt(i)));
}

}  // namespace

Status Evaluator::Binary(const Instruction& inst, const Literal& a, const Literal& b,
                         Literal& out) const {
  const Opcode op = inst.opcode.opcode;
  if (a.is_float()) {
    switch (op) {
      case Opcode::kAdd:
        EachFloatPair(a, b, out, [](double x, double y) { return x + y; });
        return Status::Ok();
      case Opcode::kSubtract:
        EachFloatPair(a, b, out, [](double x, double y) { return x - y; });
        return Status::Ok();
      case Opcode::kMultiply:
        EachFloatPair(a, b, out, [](double x, double y) { return x * y; });
        return Status::Ok();
      case Opcode::kDivide:
        EachFloatPair(a, b, out, [](double x, double y) { return x / y; });
        return Status::Ok();
      case Opcode::kRemainder:
        EachFloatPair(a, b, out, [](double x, double y) { return std::fmod(x, y); });
        return Status::Ok();
      case Opcode::kPower:
        EachFloatPair(a, b, out, [](double x, double y) { return std::pow(x, y); });
        return Status::Ok();
      case Opcode::kAtan2:
        EachFloatPair(a, b, out, [](double x, double y) { return std::atan2(x, y); });
        return Status::Ok();
      case Opcode::kMaximum:  // NaN wins, as in XLA.
        EachFloatPair(a, b, out, [](double x, double y) {
          return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
        });
        return Status::Ok();
      case Opcode::kMinimum:
        EachFloatPair(a, b, out, [](double x, double y) {
          return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
        });
        return Status::Ok();
      default:
        return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on floats");
    }
  }
  const PrimitiveType t = a.type();
  const bool is_unsigned = IsUnsigned(t) || t == PrimitiveType::kPred;
  const int bits = std::max(1, Bits(t));
  const int64_t type_min = is_unsigned ? 0 : std::numeric_limits<int64_t>::min() >> (64 - bits);
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  auto s = [](uint64_t v) { return static_cast<int64_t>(v); };
  switch (op) {
    case Opcode::kAdd:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) { return s(u(x) + u(y)); });
      return Status::Ok();
    case Opcode::kSubtract:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) { return s(u(x) - u(y)); });
      return Status::Ok();
    case Opcode::kMultiply:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) { return s(u(x) * u(y)); });
      return Status::Ok();
    case Opcode::kDivide:  // XLA: x / 0 is all ones; MIN / -1 is MIN.
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) return -1;
        if (is_unsigned) return s(u(x) / u(y));
        if (x == type_min && y == -1) return x;
        return x / y;
      });
      return Status::Ok();
    case Opcode::kRemainder:  // XLA: x % 0 is x; MIN % -1 is 0.
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) -> int64_t {
        if (y == 0) return x;
        if (is_unsigned) return s(u(x) % u(y));
        if (x == type_min && y == -1) return 0;
        return x % y;
      });
      return Status::Ok();
    case Opcode::kMaximum:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) {
        return is_unsigned ? (u(x) > u(y) ? x : y) : std::max(x, y);
      });
      return Status::Ok();
    case Opcode::kMinimum:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) {
        return is_unsigned ? (u(x) < u(y) ? x : y) : std::min(x, y);
      });
      return Status::Ok();
    case Opcode::kAnd:
      EachIntegerPair(a, b, out, [](int64_t x, int64_t y) { return x & y; });
      return Status::Ok();
    case Opcode::kOr:
      EachIntegerPair(a, b, out, [](int64_t x, int64_t y) { return x | y; });
      return Status::Ok();
    case Opcode::kXor:
      EachIntegerPair(a, b, out, [](int64_t x, int64_t y) { return x ^ y; });
      return Status::Ok();
    case Opcode::kShiftLeft:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) -> int64_t {
        return u(y) >= static_cast<uint64_t>(bits) ? 0 : s(u(x) << u(y));
      });
      return Status::Ok();
    case Opcode::kShiftRightLogical: {
      const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) -> int64_t {
        return u(y) >= static_cast<uint64_t>(bits) ? 0 : s((u(x) & mask) >> u(y));
      });
      return Status::Ok();
    }
    case Opcode::kShiftRightArithmetic:
      // The value's own sign bit fills in, whatever the type's signedness.
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) {
        const int64_t sx = bits == 64 ? x : s(u(x) << (64 - bits)) >> (64 - bits);
        return sx >> std::min<uint64_t>(u(y), 63);
      });
      return Status::Ok();
    case Opcode::kPower:
      EachIntegerPair(a, b, out, [&](int64_t x, int64_t y) -> int64_t {
        if (y < 0 && !is_unsigned) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
        uint64_t base = u(x), e = u(y), acc = 1;
        while (e != 0) {
          if (e & 1) acc *= base;
          base *= base;
          e >>= 1;
        }
        return s(acc);
      });
      return Status::Ok();
    default:
      return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' on " +
                                   std::string(hlo::PrimitiveTypeName(t)));
  }
}

}  // namespace hlocache::interp::internal
