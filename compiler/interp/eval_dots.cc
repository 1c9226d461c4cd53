// The dots beyond dot: scaled-dot and ragged-dot.
//
// scaled-dot(lhs, rhs, lhs_scale, rhs_scale) with dot's dimension numbers is the dot of the two
// operands dequantized, as XLA's ScaledDotRewriter spells it out: an operand and its scale are
// converted to a common type (bf16 when both are narrower than 16 bits, their type when they
// agree, f32 for two types of one width, else the wider), and each element is multiplied, in
// that type, by the scale element of its block (the scale has the operand's rank; each operand
// dimension is a whole number of blocks, scale dimension d covering operand dimension d / its
// size). A scale that is a scalar leaves its operand as it is. The dot then follows dot's rules.
//
// ragged-dot(lhs, rhs, group_sizes), with dot's dimension numbers plus lhs_ragged_dims={r} and
// rhs_group_dims={g} (or none), is JAX's ragged_dot_general. Along lhs dimension r the rows are
// cut into consecutive groups of group_sizes' last dimension (group j starts after the first j
// sizes), and group_sizes has the lhs batch dimensions, then the lhs dimensions of r's kind
// (non-contracting, or contracting) before r, then the groups (or the groups alone, the same
// for every position):
//   - r a non-contracting dimension: rhs has a group dimension; a row of group j is multiplied
//     with rhs's group j, a row in no group gives zeros. The result is dot's.
//   - r a contracting dimension: rhs has none; the result has the groups first, then dot's
//     dimensions, and group j sums only the contracting positions of its rows.
// A batch dimension as r is not computed here. Sums are dot's: in double from zero in
// row-major order of the contracting dimensions (integer operands of a float result converted
// to its type first), integers modulo 2^64, rounded or wrapped once.
#include <algorithm>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/dot_dims.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool IsScalar(const Shape& s) { return s.IsArray() && s.dims.empty(); }

Literal Dequantize(const Literal& operand, const Literal& scale) {
  if (IsScalar(scale.shape())) return operand;
  const Shape shape = DequantizedShape(operand.shape(), scale.shape());
  Literal out(shape);
  const std::vector<int64_t> at = ScaleOffsets(operand.shape().dims, scale.shape().dims);
  for (size_t i = 0; i < out.size(); ++i) {
    const double x = RoundToType(operand.GetFloat(i), shape.type);
    const double s = RoundToType(scale.GetFloat(static_cast<size_t>(at[i])), shape.type);
    out.SetFloat(i, x * s);
  }
  return out;
}

// The group of position `p` along the ragged dimension, given the row of sizes: -1 for none.
int64_t GroupOf(const Literal& sizes, int64_t row, int64_t groups, int64_t p) {
  int64_t start = 0;
  for (int64_t j = 0; j < groups; ++j) {
    const int64_t size = sizes.GetInt(static_cast<size_t>(row + j));
    if (p >= start && p < start + size) return j;
    start += size;
  }
  return -1;
}

Literal RaggedDot(const Instruction& inst, const RaggedDotDims& g, const Literal& lhs,
                  const Literal& rhs, const Literal& sizes) {
  Literal out(inst.shape);
  const RaggedDotTables t =
      RaggedDotTablesOf(g, lhs.shape().dims, rhs.shape().dims, sizes.shape().dims);
  const size_t B = t.lb.size(), M = t.lf.size(), N = t.rf.size(), K = t.lc.size();
  const bool floats = out.is_float();
  const PrimitiveType type = out.type();
  auto value = [&](const Literal& l, size_t i) {
    return l.is_float() ? l.AsDouble(i) : RoundToType(l.AsDouble(i), type);
  };
  // One result element of group j: the contraction over the positions `in` admits.
  auto sum = [&](size_t b, size_t m, size_t n, int64_t j, auto in) {
    double f = 0;
    uint64_t u = 0;
    for (size_t k = 0; k < K; ++k) {
      if (!in(k)) continue;
      const auto x = static_cast<size_t>(t.lb[b] + t.lf[m] + t.lc[k]);
      const auto y = static_cast<size_t>(j * t.group_stride + t.rb[b] + t.rc[k] + t.rf[n]);
      if (floats) {
        f += value(lhs, x) * value(rhs, y);
      } else {
        u += static_cast<uint64_t>(lhs.GetInt(x)) * static_cast<uint64_t>(rhs.GetInt(y));
      }
    }
    return std::make_pair(f, u);
  };
  size_t at = 0;
  auto store = [&](std::pair<double, uint64_t> v) {
    if (floats) {
      out.SetFloat(at++, v.first);
    } else {
      out.SetInt(at++, static_cast<int64_t>(v.second));
    }
  };
  if (!g.contracting) {
    for (size_t b = 0; b < B; ++b) {
      for (size_t m = 0; m < M; ++m) {
        const int64_t j = GroupOf(sizes, t.gb[b] + t.outer[m], g.groups, t.position[m]);
        for (size_t n = 0; n < N; ++n) {
          store(j < 0 ? std::make_pair(0.0, uint64_t{0})
                      : sum(b, m, n, j, [](size_t) { return true; }));
        }
      }
    }
    return out;
  }
  std::vector<int64_t> group_of(B * K);
  for (size_t b = 0; b < B; ++b) {
    for (size_t k = 0; k < K; ++k) {
      group_of[b * K + k] = GroupOf(sizes, t.gb[b] + t.outer[k], g.groups, t.position[k]);
    }
  }
  for (int64_t j = 0; j < g.groups; ++j) {
    for (size_t b = 0; b < B; ++b) {
      for (size_t m = 0; m < M; ++m) {
        for (size_t n = 0; n < N; ++n) {
          store(sum(b, m, n, j, [&](size_t k) { return group_of[b * K + k] == j; }));
        }
      }
    }
  }
  return out;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  if (inst.opcode.opcode == Opcode::kScaledDot) {
    const Literal lhs = Dequantize(*operands[0], *operands[2]);
    const Literal rhs = Dequantize(*operands[1], *operands[3]);
    return EvaluateDot(ctx.module(), inst, lhs, rhs);
  }
  HLOCACHE_ASSIGN_OR_RETURN(RaggedDotDims g,
                            ReadRaggedDotDims(ctx, inst, operands[0]->shape(), operands[1]->shape(),
                                              operands[2]->shape()));
  return RaggedDot(inst, g, *operands[0], *operands[1], *operands[2]);
}

}  // namespace

OpFamily DotOps() { return {DotRules().takes, Eval}; }

}  // namespace hlocache::interp
