#include "compiler/hlo/shape.h"

#include <vector>

#include "compiler/hlo/text_writer.h"
#include "compiler/hlo/word_table.h"

namespace hlocache::hlo {
namespace {

struct TypeInfo {
  std::string_view name;
  int bits;
};
constexpr TypeInfo kTypes[] = {
#define HLOCACHE_PT_INFO(e, s, bits) {s, bits},
    HLOCACHE_PRIMITIVE_TYPE_LIST(HLOCACHE_PT_INFO)
#undef HLOCACHE_PT_INFO
};
constexpr size_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);

}  // namespace

std::string_view PrimitiveTypeName(PrimitiveType type) {
  auto i = static_cast<size_t>(type);
  return i < kTypeCount ? kTypes[i].name : std::string_view("tuple");
}

std::optional<PrimitiveType> PrimitiveTypeFromName(std::string_view name) {
  static const WordTable table = [] {
    std::vector<std::string_view> names;
    for (const TypeInfo& t : kTypes) names.push_back(t.name);
    return WordTable(names);
  }();
  const int32_t i = table.Find(name);
  if (i < 0) return std::nullopt;
  return static_cast<PrimitiveType>(i);
}

int PrimitiveTypeBits(PrimitiveType type) {
  auto i = static_cast<size_t>(type);
  return i < kTypeCount ? kTypes[i].bits : 0;
}

bool IsSignedInt(PrimitiveType t) { return t >= PrimitiveType::kS1 && t <= PrimitiveType::kS64; }
bool IsUnsignedInt(PrimitiveType t) { return t >= PrimitiveType::kU1 && t <= PrimitiveType::kU64; }
bool IsComplex(PrimitiveType t) { return t == PrimitiveType::kC64 || t == PrimitiveType::kC128; }
bool IsFloat(PrimitiveType t) {
  return (t >= PrimitiveType::kF16 && t <= PrimitiveType::kF64) ||
         (t >= PrimitiveType::kF8E5M2 && t <= PrimitiveType::kF6E2M3FN);
}

std::optional<int64_t> Shape::ElementCount() const {
  if (!dynamic.empty()) return std::nullopt;
  return BoundElementCount();  // Static: the bounds are the dimensions.
}

std::optional<int64_t> Shape::BoundElementCount() const {
  if (!IsArray()) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > (int64_t{1} << 62) / d) return std::nullopt;
    n *= d;
  }
  return n;
}

bool HasDynamicLeaf(const Shape& shape) {
  if (!shape.IsTuple()) return shape.IsDynamic();
  for (const Shape& e : shape.tuple_elements) {
    if (HasDynamicLeaf(e)) return true;
  }
  return false;
}

bool SameValues(const Shape& a, const Shape& b) {
  if (a.IsTuple() != b.IsTuple()) return false;
  if (!a.IsTuple()) return a.type == b.type && a.dims == b.dims;
  if (a.tuple_elements.size() != b.tuple_elements.size()) return false;
  for (size_t i = 0; i < a.tuple_elements.size(); ++i) {
    if (!SameValues(a.tuple_elements[i], b.tuple_elements[i])) return false;
  }
  return true;
}

void AppendLeafShapes(const Shape& shape, std::vector<const Shape*>& out) {
  if (shape.IsTuple()) {
    for (const Shape& e : shape.tuple_elements) AppendLeafShapes(e, out);
  } else {
    out.push_back(&shape);
  }
}

std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

bool AreDistinctDimensions(std::span<const int64_t> dims, size_t rank) {
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || static_cast<size_t>(d) >= rank || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

bool Shape::HasDefaultLayout() const {
  if (!layout) return true;
  if (!layout->Details().empty()) return false;
  const auto& m2m = layout->minor_to_major;
  if (m2m.size() != dims.size()) return false;
  for (size_t i = 0; i < m2m.size(); ++i) {
    if (m2m[i] != static_cast<int64_t>(m2m.size() - 1 - i)) return false;
  }
  return true;
}

void AppendCanonicalShape(const Shape& shape, std::string& out) {
  if (shape.is_buffer) {
    out += "b(";
    if (!shape.tuple_elements.empty()) AppendCanonicalShape(shape.tuple_elements[0], out);
    out += ')';
    return;
  }
  if (shape.IsTuple()) {
    out += '(';
    for (size_t i = 0; i < shape.tuple_elements.size(); ++i) {
      if (i) out += ", ";
      AppendCanonicalShape(shape.tuple_elements[i], out);
    }
    out += ')';
    return;
  }
  // An array, most lines' shape: its bytes bounded first (the type's name and brackets, at most
  // 24 a dimension for `,<=` and 19 digits, 5 a layout entry), then written with plain stores
  // instead of an append each.
  const bool layout_written = !shape.HasDefaultLayout();
  size_t bound = 24 + 24 * shape.dims.size();
  if (layout_written) {
    bound += 4 + 5 * shape.layout->minor_to_major.size() + shape.layout->Details().size();
  }
  TextWriter w(out);
  w.Reserve(bound);
  w.Put(PrimitiveTypeName(shape.type));
  w.Put('[');
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    if (i) w.Put(',');
    if (shape.IsDynamicDim(i)) {
      if (shape.dims[i] == Shape::kUnboundedDim) {
        w.Put('?');
        continue;
      }
      w.Put("<=");
    }
    w.PutDecimal(shape.dims[i]);
  }
  w.Put(']');
  if (layout_written) {
    w.Put('{');
    const auto& m2m = shape.layout->minor_to_major;
    for (size_t i = 0; i < m2m.size(); ++i) {
      if (i) w.Put(',');
      w.PutDecimal(m2m[i]);
    }
    if (const std::string_view details = shape.layout->Details(); !details.empty()) {
      w.Put(':');
      w.Put(details);
    }
    w.Put('}');
  }
}

std::string CanonicalShapeText(const Shape& shape) {
  std::string out;
  AppendCanonicalShape(shape, out);
  return out;
}

}  // namespace hlocache::hlo
