// The dimension numbers of gather and scatter, read from their attributes and checked against
// their shapes, once for the reference interpreter and the code generator.
//
// Both ops address their operand the same way. The index array (start_indices, scatter_indices)
// holds one start vector per "position": an index over its dimensions other than
// index_vector_dim (which holds the vector's entries; when it equals the array's rank, each
// element is a one-entry vector). Entry k of a start vector is the start in operand dimension
// start_operand_dims[k] (start_index_map, scatter_dims_to_operand_dims). Batching dimensions
// (operand_batching_dims, input_batching_dims) take their start from the position itself: the
// position's digit along the paired index dimension. The dimensions of the gather's result, or
// of the scatter's updates, split into position dimensions, which enumerate the positions in
// the order of the index array's dimensions, and window dimensions (offset_dims,
// update_window_dims), which walk the slice of the operand that starts there, along the
// operand's dimensions that are neither collapsed (inserted) nor batching, in order.
//
// The checks are StableHLO's (C1-C23 of gather, C1-C22 of scatter) and XLA's shape inference:
// dimensions in range, distinct and sorted where the spec asks, sizes that agree, and the
// result (gather) or updates (scatter) of exactly the shape the attributes imply.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/shape.h"

namespace hlocache::hlo {

struct SliceAddressing {
  int64_t index_vector_dim = 0;
  int64_t index_vector_size = 1;  // Entries of one start vector.
  // Operand dimension of each entry of a start vector.
  std::vector<int64_t> start_operand_dims;
  // Dimensions of the index array other than index_vector_dim, ascending: the position's digits.
  std::vector<int64_t> index_position_dims;
  // Operand dimensions whose start is a digit of the position, and which digit (an index into
  // index_position_dims) gives each.
  std::vector<int64_t> batching_operand_dims;
  std::vector<int64_t> batching_digits;
  // Dimensions of the gather's result or the scatter's updates: those that enumerate positions
  // (position_dims[k] has the extent of index_position_dims[k]) and those that walk a window
  // (window_dims[k] walks operand dimension window_operand_dims[k]), both ascending.
  std::vector<int64_t> position_dims;
  std::vector<int64_t> window_dims;
  std::vector<int64_t> window_operand_dims;
  // Extent of the slice or window along each operand dimension: slice_sizes for a gather, the
  // updates' window extents for a scatter (1 along collapsed, inserted and batching dimensions).
  std::vector<int64_t> window_sizes;

  // Positions in all (the product of the index array's dimensions but index_vector_dim).
  int64_t PositionCount(const Shape& indices) const;
};

// The addressing of gather `inst` (result inst.shape) of `operand` at `indices`. Errors:
// kInvalidArgument whose message says what is wrong without naming the instruction (callers
// wrap it, e.g. ShapeContext::Malformed), for absent or unreadable attributes and for any
// disagreement with the shapes.
Result<SliceAddressing> GatherAddressing(const Module& module, const Instruction& inst,
                                         const Shape& operand, const Shape& indices);

// The same for scatter `inst`, of operands of shape `operand` at `indices` with updates of
// shape `updates` (the first of each; the others must have the same dimensions, which the
// caller checks).
Result<SliceAddressing> ScatterAddressing(const Module& module, const Instruction& inst,
                                          const Shape& operand, const Shape& indices,
                                          const Shape& updates);

}  // namespace hlocache::hlo
