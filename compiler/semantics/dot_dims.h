// What scaled-dot and ragged-dot (compiler/interp/eval_dots.cc defines them) read from their
// operands and attributes, read once for the interpreter and the code generator.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

// scaled-dot: the type an operand and its scale are both converted to before multiplying.
hlo::PrimitiveType DequantizedType(hlo::PrimitiveType operand, hlo::PrimitiveType scale);
// The operand as the dot sees it: its own shape for a scalar scale, else the dequantized one.
hlo::Shape DequantizedShape(const hlo::Shape& operand, const hlo::Shape& scale);
// For each element of an operand of dimensions `dims`, in row-major order, the offset of the
// element of its scale (of dimensions `scale`, each dividing its operand's) that scales it.
std::vector<int64_t> ScaleOffsets(std::span<const int64_t> dims, std::span<const int64_t> scale);

// ragged-dot's dimension numbers, checked against the operands' shapes.
struct RaggedDotDims {
  std::vector<int64_t> lb, rb, lc, rc;  // Batch and contracting dimensions, paired in order.
  std::vector<int64_t> lf, rf;          // The free dimensions, in increasing order.
  int64_t ragged = -1;                  // The lhs ragged dimension.
  int64_t group_dim = -1;               // rhs's group dimension; -1 when ragged is contracting.
  bool contracting = false;             // Whether the ragged dimension is a contracting one.
  std::vector<int64_t> outer;           // lhs dimensions of ragged's kind before it, increasing.
  int64_t groups = 0;
  bool broadcast_sizes = false;  // group_sizes is [groups] alone, for every position.
  std::vector<int64_t> result_dims;
};

// kInvalidArgument (naming the line) for dimension numbers that do not pair up with the shapes
// or a group_sizes of another shape; kFailedPrecondition for a ragged batch dimension.
Result<RaggedDotDims> ReadRaggedDotDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                        const hlo::Shape& lhs, const hlo::Shape& rhs,
                                        const hlo::Shape& group_sizes);

// The offsets of every index, in row-major order, over the dimension groups of a ragged-dot:
// into lhs (lb, lf, lc), into rhs (rb, rf, rc; a group's first element is group * group_stride
// away), into group_sizes (gb per batch index, plus outer per index of the ragged dimension's
// kind: lf's in the non-contracting case, lc's in the contracting one, whose row of sizes that
// is), and the ragged position of each such index (position).
struct RaggedDotTables {
  std::vector<int64_t> lb, lf, lc, rb, rf, rc, gb, outer, position;
  int64_t group_stride = 0;
};
RaggedDotTables RaggedDotTablesOf(const RaggedDotDims& g, std::span<const int64_t> lhs,
                                  std::span<const int64_t> rhs,
                                  std::span<const int64_t> group_sizes);

}  // namespace hlocache::interp
