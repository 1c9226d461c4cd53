#include "compiler/semantics/literal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "compiler/semantics/half.h"
#include "compiler/semantics/minifloat.h"

namespace hlocache::interp {

using hlo::PrimitiveType;

bool IsSupportedType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
    case PrimitiveType::kS1:
    case PrimitiveType::kS2:
    case PrimitiveType::kS4:
    case PrimitiveType::kU1:
    case PrimitiveType::kU2:
    case PrimitiveType::kU4:
    case PrimitiveType::kS8:
    case PrimitiveType::kS16:
    case PrimitiveType::kS32:
    case PrimitiveType::kS64:
    case PrimitiveType::kU8:
    case PrimitiveType::kU16:
    case PrimitiveType::kU32:
    case PrimitiveType::kU64:
    case PrimitiveType::kF16:
    case PrimitiveType::kBF16:
    case PrimitiveType::kF32:
    case PrimitiveType::kF64:
    case PrimitiveType::kToken:
      return true;
    default:
      return MiniFloatFormatOf(type).has_value();
  }
}

double RoundToType(double v, PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF32:
      return static_cast<double>(static_cast<float>(v));
    case PrimitiveType::kF16:
      return DecodeHalf(EncodeHalf(v, kF16Format), kF16Format);
    case PrimitiveType::kBF16:
      return DecodeHalf(EncodeHalf(v, kBF16Format), kBF16Format);
    default:
      if (const auto f = MiniFloatFormatOf(type))
        return DecodeMiniFloat(EncodeMiniFloat(v, *f), *f);
      return v;
  }
}

int64_t WrapToType(int64_t v, PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kPred:
      return v != 0 ? 1 : 0;
    case PrimitiveType::kToken:
      return 0;  // A token holds no data.
    case PrimitiveType::kS1:
    case PrimitiveType::kS2:
    case PrimitiveType::kS4: {  // The low bits, sign-extended.
      const int shift = 64 - hlo::PrimitiveTypeBits(type);
      return static_cast<int64_t>(static_cast<uint64_t>(v) << shift) >> shift;
    }
    case PrimitiveType::kU1:
    case PrimitiveType::kU2:
    case PrimitiveType::kU4:
      return v & ((int64_t{1} << hlo::PrimitiveTypeBits(type)) - 1);
    case PrimitiveType::kS8:
      return static_cast<int8_t>(v);
    case PrimitiveType::kS16:
      return static_cast<int16_t>(v);
    case PrimitiveType::kS32:
      return static_cast<int32_t>(v);
    case PrimitiveType::kU8:
      return static_cast<uint8_t>(v);
    case PrimitiveType::kU16:
      return static_cast<uint16_t>(v);
    case PrimitiveType::kU32:
      return static_cast<uint32_t>(v);
    default:
      return v;  // s64, and u64 as its bit pattern.
  }
}

Literal::Literal(hlo::Shape shape) : shape_(std::move(shape)) {
  if (shape_.IsTuple()) {
    for (const hlo::Shape& e : shape_.tuple_elements) tuple_.emplace_back(e);
    return;
  }
  const size_t n = static_cast<size_t>(shape_.ElementCount().value_or(0));
  is_float_ = hlo::IsFloat(shape_.type);
  if (is_float_) {
    floats_.assign(n, 0.0);
  } else {
    ints_.assign(n, 0);
  }
}

Result<Literal> Literal::MakeZeros(const hlo::Shape& shape, uint64_t limit) {
  // Checks the whole tree first, so that no allocation happens for a shape that is refused.
  uint64_t total = 0;
  std::vector<const hlo::Shape*> pending = {&shape};
  while (!pending.empty()) {
    const hlo::Shape* s = pending.back();
    pending.pop_back();
    if (s->IsTuple()) {
      for (const hlo::Shape& e : s->tuple_elements) pending.push_back(&e);
      continue;
    }
    if (!IsSupportedType(s->type)) {
      return Error(InvalidArgument("the interpreter does not compute with " +
                                   std::string(hlo::PrimitiveTypeName(s->type))));
    }
    auto n = s->ElementCount();
    if (!n) return Error(InvalidArgument("shape " + hlo::CanonicalShapeText(*s) + " is dynamic"));
    total += static_cast<uint64_t>(*n);
    if (total > limit) {
      return Error(InvalidArgument("shape " + hlo::CanonicalShapeText(shape) + " holds more than " +
                                   std::to_string(limit) + " elements"));
    }
  }
  return Literal(shape);
}

double Literal::AsDouble(size_t i) const {
  if (is_float_) return floats_[i];
  if (shape_.type == PrimitiveType::kU64)
    return static_cast<double>(static_cast<uint64_t>(ints_[i]));
  return static_cast<double>(ints_[i]);
}

bool Literal::operator==(const Literal& other) const {
  if (is_tuple() != other.is_tuple()) return false;
  if (is_tuple()) return tuple_ == other.tuple_;
  if (shape_.type != other.shape_.type || shape_.dims != other.shape_.dims) return false;
  if (!is_float_) return ints_ == other.ints_;
  for (size_t i = 0; i < floats_.size(); ++i) {
    const double a = floats_[i], b = other.floats_[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::memcmp(&a, &b, sizeof a) != 0) return false;  // -0 and 0 differ; NaNs match.
  }
  return true;
}

std::string Literal::ToString() const {
  std::string out = hlo::CanonicalShapeText(shape_);
  out += " {";
  if (is_tuple()) {
    for (size_t i = 0; i < tuple_.size(); ++i) out += (i ? ", " : "") + tuple_[i].ToString();
  } else {
    for (size_t i = 0; i < size(); ++i) {
      if (i) out += ", ";
      if (i == 64) {
        out += "...";
        break;
      }
      if (is_float_) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", floats_[i]);
        out += buf;
      } else if (shape_.type == PrimitiveType::kU64) {
        out += std::to_string(static_cast<uint64_t>(ints_[i]));
      } else {
        out += std::to_string(ints_[i]);
      }
    }
  }
  out += '}';
  return out;
}

namespace {

template <typename T>
void AppendAs(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

template <typename T>
T ReadAs(std::string_view bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

std::string ToBytes(const Literal& a) {
  std::string out;
  out.reserve(a.size() * static_cast<size_t>(hlo::BufferElementBytes(a.type())));
  const auto mini = MiniFloatFormatOf(a.type());
  for (size_t i = 0; i < a.size(); ++i) {
    if (mini) {
      AppendAs(out, EncodeMiniFloat(a.GetFloat(i), *mini));
      continue;
    }
    switch (a.type()) {
      case PrimitiveType::kF32:
        AppendAs(out, static_cast<float>(a.GetFloat(i)));
        break;
      case PrimitiveType::kF64:
        AppendAs(out, a.GetFloat(i));
        break;
      case PrimitiveType::kF16:
        AppendAs(out, EncodeHalf(a.GetFloat(i), kF16Format));
        break;
      case PrimitiveType::kBF16:
        AppendAs(out, EncodeHalf(a.GetFloat(i), kBF16Format));
        break;
      case PrimitiveType::kPred:
      case PrimitiveType::kToken:
      case PrimitiveType::kS1:  // Sub-byte integers: one byte, sign- or zero-extended.
      case PrimitiveType::kS2:
      case PrimitiveType::kS4:
      case PrimitiveType::kU1:
      case PrimitiveType::kU2:
      case PrimitiveType::kU4:
      case PrimitiveType::kS8:
      case PrimitiveType::kU8:
        AppendAs(out, static_cast<uint8_t>(a.GetInt(i)));
        break;
      case PrimitiveType::kS16:
      case PrimitiveType::kU16:
        AppendAs(out, static_cast<uint16_t>(a.GetInt(i)));
        break;
      case PrimitiveType::kS32:
      case PrimitiveType::kU32:
        AppendAs(out, static_cast<uint32_t>(a.GetInt(i)));
        break;
      default:
        AppendAs(out, static_cast<uint64_t>(a.GetInt(i)));
        break;
    }
  }
  return out;
}

Result<Literal> FromBytes(const hlo::Shape& shape, std::string_view bytes) {
  HLOCACHE_ASSIGN_OR_RETURN(Literal out, Literal::MakeZeros(shape));
  if (out.is_tuple()) return Error(InvalidArgument("FromBytes takes an array shape"));
  const auto width = static_cast<size_t>(hlo::BufferElementBytes(shape.type));
  if (bytes.size() != out.size() * width) {
    return Error(InvalidArgument(std::to_string(bytes.size()) + " bytes for " +
                                 hlo::CanonicalShapeText(shape)));
  }
  const auto mini = MiniFloatFormatOf(shape.type);
  for (size_t i = 0; i < out.size(); ++i) {
    if (mini) {
      out.SetFloat(i, DecodeMiniFloat(ReadAs<uint8_t>(bytes, i), *mini));
      continue;
    }
    switch (shape.type) {
      case PrimitiveType::kF32:
        out.SetFloat(i, ReadAs<float>(bytes, i));
        break;
      case PrimitiveType::kF64:
        out.SetFloat(i, ReadAs<double>(bytes, i));
        break;
      case PrimitiveType::kF16:
        out.SetFloat(i, DecodeHalf(ReadAs<uint16_t>(bytes, i), kF16Format));
        break;
      case PrimitiveType::kBF16:
        out.SetFloat(i, DecodeHalf(ReadAs<uint16_t>(bytes, i), kBF16Format));
        break;
      case PrimitiveType::kPred:
      case PrimitiveType::kToken:
      case PrimitiveType::kS1:  // Sub-byte integers: the byte's low bits (SetInt wraps).
      case PrimitiveType::kS2:
      case PrimitiveType::kS4:
      case PrimitiveType::kU1:
      case PrimitiveType::kU2:
      case PrimitiveType::kU4:
        out.SetInt(i, ReadAs<uint8_t>(bytes, i));
        break;
      case PrimitiveType::kS8:
        out.SetInt(i, ReadAs<int8_t>(bytes, i));
        break;
      case PrimitiveType::kU8:
        out.SetInt(i, ReadAs<uint8_t>(bytes, i));
        break;
      case PrimitiveType::kS16:
        out.SetInt(i, ReadAs<int16_t>(bytes, i));
        break;
      case PrimitiveType::kU16:
        out.SetInt(i, ReadAs<uint16_t>(bytes, i));
        break;
      case PrimitiveType::kS32:
        out.SetInt(i, ReadAs<int32_t>(bytes, i));
        break;
      case PrimitiveType::kU32:
        out.SetInt(i, ReadAs<uint32_t>(bytes, i));
        break;
      default:
        out.SetInt(i, static_cast<int64_t>(ReadAs<uint64_t>(bytes, i)));
        break;
    }
  }
  return out;
}

}  // namespace hlocache::interp
