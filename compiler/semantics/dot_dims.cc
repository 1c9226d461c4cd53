#include "compiler/semantics/dot_dims.h"

#include <algorithm>
#include <string>

#include "compiler/semantics/signature.h"

namespace hlocache::interp {

using hlo::PrimitiveType;
using hlo::Shape;

PrimitiveType DequantizedType(PrimitiveType operand, PrimitiveType scale) {
  const int a = hlo::PrimitiveTypeBits(operand), b = hlo::PrimitiveTypeBits(scale);
  if (a < 16 && b < 16) return PrimitiveType::kBF16;
  if (operand == scale) return operand;
  if (a == b) return PrimitiveType::kF32;
  return a > b ? operand : scale;
}

Shape DequantizedShape(const Shape& operand, const Shape& scale) {
  if (scale.IsArray() && scale.dims.empty()) return operand;
  return ArrayShape(DequantizedType(operand.type, scale.type), operand.dims);
}

std::vector<int64_t> ScaleOffsets(std::span<const int64_t> dims, std::span<const int64_t> scale) {
  const std::vector<int64_t> strides = hlo::RowMajorStrides(scale);
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)));
  std::vector<int64_t> index(dims.size(), 0);
  for (size_t at = 0; at < out.size(); ++at) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d) off += index[d] / (dims[d] / scale[d]) * strides[d];
    out[at] = off;
    for (size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

namespace {

bool Has(std::span<const int64_t> v, int64_t d) {
  return std::find(v.begin(), v.end(), d) != v.end();
}

std::vector<int64_t> Joined(std::vector<int64_t> a, std::span<const int64_t> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The offsets, in row-major order of the index over dimensions `group` of an array of dimensions
// `dims`, of sum over j of index[j] * coefficient(group[j]).
template <typename Coefficient>
std::vector<int64_t> Offsets(std::span<const int64_t> group, std::span<const int64_t> dims,
                             Coefficient coefficient) {
  int64_t count = 1;
  for (int64_t d : group) count *= dims[static_cast<size_t>(d)];
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(count, 0)));
  std::vector<int64_t> index(group.size(), 0);
  for (size_t at = 0; at < out.size(); ++at) {
    int64_t off = 0;
    for (size_t j = 0; j < group.size(); ++j) off += index[j] * coefficient(group[j]);
    out[at] = off;
    for (size_t j = group.size(); j-- > 0;) {
      if (++index[j] < dims[static_cast<size_t>(group[j])]) break;
      index[j] = 0;
    }
  }
  return out;
}

}  // namespace

Result<RaggedDotDims> ReadRaggedDotDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                        const Shape& lhs, const Shape& rhs, const Shape& sizes) {
  RaggedDotDims g;
  HLOCACHE_ASSIGN_OR_RETURN(g.lb, ctx.IntsOr(inst, "lhs_batch_dims", {}));
  HLOCACHE_ASSIGN_OR_RETURN(g.rb, ctx.IntsOr(inst, "rhs_batch_dims", {}));
  HLOCACHE_ASSIGN_OR_RETURN(g.lc, ctx.IntsOr(inst, "lhs_contracting_dims", {}));
  HLOCACHE_ASSIGN_OR_RETURN(g.rc, ctx.IntsOr(inst, "rhs_contracting_dims", {}));
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> ragged, ctx.IntsOr(inst, "lhs_ragged_dims", {}));
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> group, ctx.IntsOr(inst, "rhs_group_dims", {}));
  if (!lhs.IsArray() || !rhs.IsArray()) return Error(ctx.Malformed(inst, "takes arrays"));
  if (g.lb.size() != g.rb.size() || g.lc.size() != g.rc.size() || ragged.size() != 1 ||
      group.size() > 1 || !hlo::AreDistinctDimensions(Joined(g.lb, g.lc), lhs.dims.size()) ||
      !hlo::AreDistinctDimensions(Joined(Joined(g.rb, g.rc), group), rhs.dims.size()) ||
      ragged[0] < 0 || ragged[0] >= lhs.rank()) {
    return Error(ctx.Malformed(inst, "the dimension numbers do not pair up"));
  }
  g.ragged = ragged[0];
  if (Has(g.lb, g.ragged)) return Error(ctx.Unsupported(inst, "a ragged batch dimension"));
  g.contracting = Has(g.lc, g.ragged);
  if (g.contracting != group.empty()) {
    return Error(ctx.Malformed(inst, g.contracting ? "a ragged contracting dimension takes no "
                                                     "rhs_group_dims"
                                                   : "a ragged non-contracting dimension needs "
                                                     "rhs_group_dims"));
  }
  if (!group.empty()) g.group_dim = group[0];
  for (size_t k = 0; k < g.lb.size(); ++k) {
    if (lhs.dims[static_cast<size_t>(g.lb[k])] != rhs.dims[static_cast<size_t>(g.rb[k])]) {
      return Error(ctx.Malformed(inst, "batch dimensions differ in size"));
    }
  }
  for (size_t k = 0; k < g.lc.size(); ++k) {
    if (lhs.dims[static_cast<size_t>(g.lc[k])] != rhs.dims[static_cast<size_t>(g.rc[k])]) {
      return Error(ctx.Malformed(inst, "contracting dimensions differ in size"));
    }
  }
  for (int64_t d = 0; d < lhs.rank(); ++d) {
    if (!Has(g.lb, d) && !Has(g.lc, d)) g.lf.push_back(d);
  }
  for (int64_t d = 0; d < rhs.rank(); ++d) {
    if (!Has(g.rb, d) && !Has(g.rc, d) && d != g.group_dim) g.rf.push_back(d);
  }
  for (int64_t d : g.contracting ? g.lc : g.lf) {
    if (d < g.ragged) g.outer.push_back(d);
  }
  std::sort(g.outer.begin(), g.outer.end());
  if (!sizes.IsArray() || hlo::IsFloat(sizes.type) || sizes.type == PrimitiveType::kPred ||
      hlo::PrimitiveTypeBits(sizes.type) == 0 || sizes.dims.empty()) {
    return Error(ctx.Malformed(inst, "group_sizes is not an integer array"));
  }
  g.groups = sizes.dims.back();
  std::vector<int64_t> want;
  for (int64_t d : g.lb) want.push_back(lhs.dims[static_cast<size_t>(d)]);
  for (int64_t d : g.outer) want.push_back(lhs.dims[static_cast<size_t>(d)]);
  want.push_back(g.groups);
  g.broadcast_sizes = sizes.dims.size() == 1 && want.size() > 1;
  if (!g.broadcast_sizes && sizes.dims != want) {
    return Error(ctx.Malformed(
        inst, "group_sizes is not " + hlo::CanonicalShapeText(ArrayShape(sizes.type, want))));
  }
  if (!g.contracting && rhs.dims[static_cast<size_t>(g.group_dim)] != g.groups) {
    return Error(ctx.Malformed(inst, "rhs's group dimension is not the number of groups"));
  }
  if (g.contracting) g.result_dims.push_back(g.groups);
  for (int64_t d : g.lb) g.result_dims.push_back(lhs.dims[static_cast<size_t>(d)]);
  for (int64_t d : g.lf) g.result_dims.push_back(lhs.dims[static_cast<size_t>(d)]);
  for (int64_t d : g.rf) g.result_dims.push_back(rhs.dims[static_cast<size_t>(d)]);
  return g;
}

RaggedDotTables RaggedDotTablesOf(const RaggedDotDims& g, std::span<const int64_t> lhs,
                                  std::span<const int64_t> rhs,
                                  std::span<const int64_t> group_sizes) {
  const auto ls = hlo::RowMajorStrides(lhs), rs = hlo::RowMajorStrides(rhs);
  const auto ss = hlo::RowMajorStrides(group_sizes);
  auto in = [](std::span<const int64_t> strides) {
    return [strides](int64_t d) { return strides[static_cast<size_t>(d)]; };
  };
  // group_sizes' dimension j (its batch dimensions, then the outer ones), or none when it is
  // broadcast.
  auto sizes_stride = [&](size_t j) { return g.broadcast_sizes ? int64_t{0} : ss[j]; };
  RaggedDotTables t;
  t.lb = Offsets(g.lb, lhs, in(ls));
  t.lf = Offsets(g.lf, lhs, in(ls));
  t.lc = Offsets(g.lc, lhs, in(ls));
  t.rb = Offsets(g.rb, rhs, in(rs));
  t.rf = Offsets(g.rf, rhs, in(rs));
  t.rc = Offsets(g.rc, rhs, in(rs));
  t.gb = Offsets(g.lb, lhs, [&](int64_t d) {
    return sizes_stride(static_cast<size_t>(std::find(g.lb.begin(), g.lb.end(), d) - g.lb.begin()));
  });
  const auto& kind = g.contracting ? g.lc : g.lf;
  t.outer = Offsets(kind, lhs, [&](int64_t d) {
    const auto it = std::find(g.outer.begin(), g.outer.end(), d);
    if (it == g.outer.end()) return int64_t{0};
    return sizes_stride(g.lb.size() + static_cast<size_t>(it - g.outer.begin()));
  });
  t.position =
      Offsets(kind, lhs, [&](int64_t d) { return d == g.ragged ? int64_t{1} : int64_t{0}; });
  t.group_stride = g.contracting ? 0 : rs[static_cast<size_t>(g.group_dim)];
  return t;
}

}  // namespace hlocache::interp
