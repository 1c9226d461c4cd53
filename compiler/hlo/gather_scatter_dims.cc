#include "compiler/hlo/gather_scatter_dims.h"

#include <algorithm>
#include <string>

namespace hlocache::hlo {
namespace {

// The attribute names of one op: gather and scatter spell the same roles differently.
struct Names {
  const char* window;
  const char* collapsed;
  const char* start_map;
  const char* operand_batching;
  const char* index_batching;
  const char* spaced;  // What the window dimensions index: the result or the updates.
};
constexpr Names kGather = {
    "offset_dims",           "collapsed_slice_dims",        "start_index_map",
    "operand_batching_dims", "start_indices_batching_dims", "the result"};
constexpr Names kScatter = {
    "update_window_dims",  "inserted_window_dims",          "scatter_dims_to_operand_dims",
    "input_batching_dims", "scatter_indices_batching_dims", "the updates"};

struct Attributes {
  std::vector<int64_t> window, collapsed, start_map, operand_batching, index_batching;
  int64_t index_vector_dim = 0;
};

Status BadDims(std::string why) { return InvalidArgument(std::move(why)); }

std::string Text(std::span<const int64_t> v) {
  std::string s = "{";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s + "}";
}

Result<std::vector<int64_t>> List(const Module& m, const Instruction& inst, const char* name,
                                  bool required) {
  const Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) {
    if (required) return Error(BadDims(std::string("lacks ") + name));
    return std::vector<int64_t>();
  }
  auto v = m.IntList(*a);
  if (!v) return Error(BadDims(std::string(name) + " is not a list of integers"));
  return std::move(*v);
}

Result<Attributes> Read(const Module& m, const Instruction& inst, const Names& n) {
  Attributes a;
  HLOCACHE_ASSIGN_OR_RETURN(a.window, List(m, inst, n.window, true));
  HLOCACHE_ASSIGN_OR_RETURN(a.collapsed, List(m, inst, n.collapsed, true));
  HLOCACHE_ASSIGN_OR_RETURN(a.start_map, List(m, inst, n.start_map, true));
  HLOCACHE_ASSIGN_OR_RETURN(a.operand_batching, List(m, inst, n.operand_batching, false));
  HLOCACHE_ASSIGN_OR_RETURN(a.index_batching, List(m, inst, n.index_batching, false));
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> ivd, List(m, inst, "index_vector_dim", true));
  if (ivd.size() != 1) return Error(BadDims("index_vector_dim is not one integer"));
  a.index_vector_dim = ivd[0];
  return a;
}

// Strictly ascending (so distinct) and inside [0, rank).
bool SortedIn(std::span<const int64_t> v, int64_t rank) {
  for (size_t k = 0; k < v.size(); ++k) {
    if (v[k] < 0 || v[k] >= rank || (k > 0 && v[k] <= v[k - 1])) return false;
  }
  return true;
}

bool Contains(std::span<const int64_t> v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<int64_t> Concat(std::vector<int64_t> a, std::span<const int64_t> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Everything but the window extents, which gather takes from slice_sizes and scatter from the
// updates.
Result<SliceAddressing> Address(const Attributes& at, const Names& n, const Shape& operand,
                                const Shape& indices, const Shape& spaced) {
  if (!operand.IsArray() || !indices.IsArray() || !spaced.IsArray()) {
    return Error(
        BadDims("the operand, the indices and " + std::string(n.spaced) + " must be arrays"));
  }
  if (!IsSignedInt(indices.type) && !IsUnsignedInt(indices.type)) {
    return Error(BadDims("the indices are not integers"));
  }
  const int64_t orank = operand.rank(), irank = indices.rank(), srank = spaced.rank();
  SliceAddressing a;
  a.index_vector_dim = at.index_vector_dim;
  if (at.index_vector_dim < 0 || at.index_vector_dim > irank) {
    return Error(BadDims("index_vector_dim " + std::to_string(at.index_vector_dim) +
                         " is outside [0, " + std::to_string(irank) + "]"));
  }
  a.index_vector_size =
      at.index_vector_dim < irank ? indices.dims[static_cast<size_t>(at.index_vector_dim)] : 1;
  if (static_cast<int64_t>(at.start_map.size()) != a.index_vector_size) {
    return Error(BadDims(std::string(n.start_map) + " has " + std::to_string(at.start_map.size()) +
                         " entries for start vectors of " + std::to_string(a.index_vector_size)));
  }
  if (!SortedIn(at.window, srank)) {
    return Error(BadDims(std::string(n.window) + "=" + Text(at.window) +
                         " is not ascending dimensions of " + n.spaced));
  }
  if (!SortedIn(at.collapsed, orank)) {
    return Error(BadDims(std::string(n.collapsed) + "=" + Text(at.collapsed) +
                         " is not ascending dimensions of the operand"));
  }
  if (!SortedIn(at.operand_batching, orank)) {
    return Error(BadDims(std::string(n.operand_batching) + "=" + Text(at.operand_batching) +
                         " is not ascending dimensions of the operand"));
  }
  if (!AreDistinctDimensions(Concat(at.collapsed, at.operand_batching),
                             static_cast<size_t>(orank))) {
    return Error(
        BadDims(std::string(n.collapsed) + " and " + n.operand_batching + " share a dimension"));
  }
  if (orank !=
      static_cast<int64_t>(at.window.size() + at.collapsed.size() + at.operand_batching.size())) {
    return Error(BadDims("the operand's rank " + std::to_string(orank) + " is not the count of " +
                         n.window + ", " + n.collapsed + " and " + n.operand_batching));
  }
  if (!AreDistinctDimensions(Concat(at.start_map, at.operand_batching),
                             static_cast<size_t>(orank))) {
    return Error(BadDims(std::string(n.start_map) + "=" + Text(at.start_map) +
                         " is not distinct dimensions of the operand outside " +
                         n.operand_batching));
  }
  if (!AreDistinctDimensions(at.index_batching, static_cast<size_t>(irank)) ||
      Contains(at.index_batching, at.index_vector_dim)) {
    return Error(BadDims(std::string(n.index_batching) + "=" + Text(at.index_batching) +
                         " is not distinct dimensions of the indices other than index_vector_dim"));
  }
  if (at.index_batching.size() != at.operand_batching.size()) {
    return Error(BadDims(std::string(n.index_batching) + " and " + n.operand_batching +
                         " differ in length"));
  }
  for (size_t j = 0; j < at.index_batching.size(); ++j) {
    if (indices.dims[static_cast<size_t>(at.index_batching[j])] !=
        operand.dims[static_cast<size_t>(at.operand_batching[j])]) {
      return Error(BadDims("batching dimension " + std::to_string(j) +
                           " has different extents in the operand and the indices"));
    }
  }
  for (int64_t d = 0; d < irank; ++d) {
    if (d != at.index_vector_dim) a.index_position_dims.push_back(d);
  }
  for (int64_t d = 0; d < srank; ++d) {
    if (!Contains(at.window, d)) a.position_dims.push_back(d);
  }
  if (a.position_dims.size() != a.index_position_dims.size()) {
    return Error(BadDims(std::string(n.spaced) + " has rank " + std::to_string(srank) +
                         ", not the count of " + n.window +
                         " plus the indices' dimensions but "
                         "index_vector_dim (" +
                         std::to_string(at.window.size() + a.index_position_dims.size()) + ")"));
  }
  for (size_t k = 0; k < a.position_dims.size(); ++k) {
    const int64_t have = spaced.dims[static_cast<size_t>(a.position_dims[k])];
    const int64_t want = indices.dims[static_cast<size_t>(a.index_position_dims[k])];
    if (have != want) {
      return Error(BadDims("dimension " + std::to_string(a.position_dims[k]) + " of " + n.spaced +
                           " is " + std::to_string(have) + ", not " + std::to_string(want) +
                           " as dimension " + std::to_string(a.index_position_dims[k]) +
                           " of the indices"));
    }
  }
  a.start_operand_dims = at.start_map;
  a.batching_operand_dims = at.operand_batching;
  for (int64_t d : at.index_batching) {
    const auto at_digit = std::find(a.index_position_dims.begin(), a.index_position_dims.end(), d);
    a.batching_digits.push_back(at_digit - a.index_position_dims.begin());
  }
  a.window_dims = at.window;
  for (int64_t d = 0; d < orank; ++d) {
    if (!Contains(at.collapsed, d) && !Contains(at.operand_batching, d)) {
      a.window_operand_dims.push_back(d);
    }
  }
  a.window_sizes.assign(static_cast<size_t>(orank), 1);
  return a;
}

}  // namespace

int64_t SliceAddressing::PositionCount(const Shape& indices) const {
  int64_t count = 1;
  for (int64_t d : index_position_dims) count *= indices.dims[static_cast<size_t>(d)];
  return count;
}

Result<SliceAddressing> GatherAddressing(const Module& module, const Instruction& inst,
                                         const Shape& operand, const Shape& indices) {
  HLOCACHE_ASSIGN_OR_RETURN(Attributes at, Read(module, inst, kGather));
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, List(module, inst, "slice_sizes", true));
  const Shape& result = inst.shape;
  HLOCACHE_ASSIGN_OR_RETURN(SliceAddressing a, Address(at, kGather, operand, indices, result));
  if (result.type != operand.type) {
    return Error(BadDims("the result's element type is not the operand's"));
  }
  if (sizes.size() != operand.dims.size()) {
    return Error(BadDims("slice_sizes has " + std::to_string(sizes.size()) +
                         " entries for an operand of rank " + std::to_string(operand.rank())));
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > operand.dims[d]) {
      return Error(BadDims("slice_sizes=" + Text(sizes) + " does not fit in the operand"));
    }
  }
  for (int64_t d : Concat(at.collapsed, at.operand_batching)) {
    if (sizes[static_cast<size_t>(d)] > 1) {
      return Error(BadDims("the slice size of collapsed or batching dimension " +
                           std::to_string(d) + " is more than 1"));
    }
  }
  for (size_t k = 0; k < a.window_dims.size(); ++k) {
    const int64_t have = result.dims[static_cast<size_t>(a.window_dims[k])];
    const int64_t want = sizes[static_cast<size_t>(a.window_operand_dims[k])];
    if (have != want) {
      return Error(BadDims("dimension " + std::to_string(a.window_dims[k]) + " of the result is " +
                           std::to_string(have) + ", not the slice size " + std::to_string(want)));
    }
  }
  a.window_sizes = std::move(sizes);
  return a;
}

Result<SliceAddressing> ScatterAddressing(const Module& module, const Instruction& inst,
                                          const Shape& operand, const Shape& indices,
                                          const Shape& updates) {
  HLOCACHE_ASSIGN_OR_RETURN(Attributes at, Read(module, inst, kScatter));
  HLOCACHE_ASSIGN_OR_RETURN(SliceAddressing a, Address(at, kScatter, operand, indices, updates));
  for (size_t k = 0; k < a.window_dims.size(); ++k) {
    const auto d = static_cast<size_t>(a.window_operand_dims[k]);
    const int64_t extent = updates.dims[static_cast<size_t>(a.window_dims[k])];
    if (extent > operand.dims[d]) {
      return Error(BadDims("the update window's dimension " + std::to_string(a.window_dims[k]) +
                           " (" + std::to_string(extent) + ") is larger than the operand's " +
                           std::to_string(d) + " (" + std::to_string(operand.dims[d]) + ")"));
    }
    a.window_sizes[d] = extent;
  }
  return a;
}

}  // namespace hlocache::hlo
