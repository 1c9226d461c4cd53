// sort and topk.
//
// sort(x0, ..., xn-1), dimensions={d}, is_stable=B, to_apply=less: the operands share their
// dimensions; each run of elements along dimension d (every other index fixed) is permuted,
// the same way in every operand, into the order `less` defines. `less` takes 2n scalars
// (x0[a], x0[b], x1[a], x1[b], ...) and returns pred[] (or the tuple (pred[])): whether
// position a goes before position b. The result is x0's shape, or the tuple of the operands'.
//
// Every sort is stable, is_stable or not (an unstable sort may return any order of equal
// elements, so the stable one is among them), and is a bottom-up merge sort: runs of width 1,
// 2, 4, ... merged pairwise, the right run's head taken only when it is less than the left's.
// The generated code runs the same steps (hc_merge_sort in the prelude), so the two agree even
// for a comparator that is no strict weak order, and neither ever reads out of bounds whatever
// the comparator answers. Here the merges of one pass, over every row, advance in lockstep: one
// comparison of each at a time, all of them one evaluation of the comparator over arrays
// (EvalContext::CallElementwise).
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

void CopyElement(const Literal& from, size_t i, Literal& to, size_t j) {
  if (to.is_float()) {
    to.SetFloat(j, from.GetFloat(i));
  } else {
    to.SetInt(j, from.GetInt(i));
  }
}

// One merge of the bottom-up merge sort: runs [lo, mid) and [mid, hi) of a row's positions
// (in `from`) merged into `to`, the right run's head taken only when it is less than the left's.
struct Merge {
  int64_t row, lo, mid, hi, i, j, k;
};

Result<Literal> EvalSort(EvalContext& ctx, const Instruction& inst,
                         std::span<const Literal* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(int32_t less, ctx.Callee(inst, "to_apply"));
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints(inst, "dimensions"));
  const auto& shape = operands[0]->shape().dims;
  const auto d = static_cast<size_t>(dims[0]);
  const int64_t length = shape[d];
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= shape[k];
  for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  const int64_t rows = outer * inner;
  // Element `position` of row r (r = o * inner + in) is at o * length * inner + in + position *
  // inner.
  auto at = [&](int64_t row, int64_t position) {
    return static_cast<size_t>((row / inner) * length * inner + row % inner + position * inner);
  };
  // Each row's permutation, row after row; the merges of one pass run in lockstep, one
  // comparison of each at a time, and each merge takes exactly the steps it would alone.
  std::vector<int64_t> from(static_cast<size_t>(rows * length)), to(from.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < length; ++p) from[static_cast<size_t>(r * length + p)] = p;
  }
  auto pos = [&](const Merge& m, int64_t p) { return static_cast<size_t>(m.row * length + p); };
  std::vector<Merge> merges;
  for (int64_t width = 1; width < length; width *= 2) {
    merges.clear();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t lo = 0; lo < length; lo += 2 * width) {
        const int64_t mid = std::min(lo + width, length), hi = std::min(lo + 2 * width, length);
        if (mid < hi) merges.push_back({r, lo, mid, hi, lo, mid, lo});
      }
    }
    while (!merges.empty()) {
      // The comparator's arguments for every merge still comparing: (x0[right], x0[left],
      // x1[right], x1[left], ...).
      const int64_t count = static_cast<int64_t>(merges.size());
      std::vector<Literal> args;
      for (const Literal* x : operands) {
        args.emplace_back(ArrayShape(x->type(), {count}));
        args.emplace_back(ArrayShape(x->type(), {count}));
      }
      for (size_t q = 0; q < merges.size(); ++q) {
        const Merge& m = merges[q];
        const int64_t right = from[pos(m, m.j)], left = from[pos(m, m.i)];
        for (size_t k = 0; k < operands.size(); ++k) {
          CopyElement(*operands[k], at(m.row, right), args[2 * k], q);
          CopyElement(*operands[k], at(m.row, left), args[2 * k + 1], q);
        }
      }
      HLOCACHE_ASSIGN_OR_RETURN(Literal r, ctx.CallElementwise(less, args));
      const Literal& right_first = r.is_tuple() ? r.elements()[0] : r;
      size_t kept = 0;
      for (size_t q = 0; q < merges.size(); ++q) {
        Merge m = merges[q];
        to[pos(m, m.k++)] = right_first.GetInt(q) != 0 ? from[pos(m, m.j++)] : from[pos(m, m.i++)];
        if (m.i < m.mid && m.j < m.hi) {
          merges[kept++] = m;
          continue;
        }
        while (m.i < m.mid) to[pos(m, m.k++)] = from[pos(m, m.i++)];
        while (m.j < m.hi) to[pos(m, m.k++)] = from[pos(m, m.j++)];
      }
      merges.resize(kept);
    }
    // Runs that had no partner (and rows too short to merge) are copied as they are.
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t lo = 0; lo < length; lo += 2 * width) {
        if (lo + width >= length) {  // No right run: no merge was made.
          for (int64_t p = lo; p < length; ++p) {
            to[static_cast<size_t>(r * length + p)] = from[static_cast<size_t>(r * length + p)];
          }
        }
      }
    }
    from.swap(to);
  }

  std::vector<Literal> outs;
  for (const Literal* x : operands) outs.emplace_back(x->shape());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < length; ++p) {
      const size_t source = at(r, from[static_cast<size_t>(r * length + p)]);
      for (size_t k = 0; k < operands.size(); ++k)
        CopyElement(*operands[k], source, outs[k], at(r, p));
    }
  }
  if (outs.size() == 1) return std::move(outs[0]);
  Literal tuple(inst.shape);
  for (size_t k = 0; k < outs.size(); ++k) tuple.elements()[k] = std::move(outs[k]);
  return tuple;
}

// A float's place in the total order, as a signed integer (the generated code computes the
// same, hc_total_key).
int64_t TotalOrderKey(double v) {
  const auto bits = std::bit_cast<int64_t>(v);
  return bits < 0 ? bits ^ std::numeric_limits<int64_t>::max() : bits;
}

Result<Literal> EvalTopK(const ShapeContext& ctx, const Instruction& inst, const Literal& x) {
  HLOCACHE_ASSIGN_OR_RETURN(int64_t k, ctx.IntOr(inst, "k", -1));
  const bool largest = ctx.AttributeText(inst, "largest") != "false";
  const int64_t n = x.shape().dims.back();
  const int64_t rows = n == 0 ? 0 : static_cast<int64_t>(x.size()) / n;
  Literal values(inst.shape.tuple_elements[0]), positions(inst.shape.tuple_elements[1]);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    auto at = [&](int64_t p) { return static_cast<size_t>(r * n + p); };
    std::iota(order.begin(), order.end(), 0);
    // Unsigned integers compare as their values, which GetInt holds for all but u64.
    auto key_less = [&](int64_t a, int64_t b) {
      if (x.is_float()) return TotalOrderKey(x.GetFloat(at(a))) < TotalOrderKey(x.GetFloat(at(b)));
      if (x.type() == PrimitiveType::kU64) {
        return static_cast<uint64_t>(x.GetInt(at(a))) < static_cast<uint64_t>(x.GetInt(at(b)));
      }
      return x.GetInt(at(a)) < x.GetInt(at(b));
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return largest ? key_less(b, a) : key_less(a, b);
    });
    for (int64_t j = 0; j < k; ++j) {
      const auto to = static_cast<size_t>(r * k + j);
      if (x.is_float()) {
        values.SetFloat(to, x.GetFloat(at(order[static_cast<size_t>(j)])));
      } else {
        values.SetInt(to, x.GetInt(at(order[static_cast<size_t>(j)])));
      }
      positions.SetInt(to, order[static_cast<size_t>(j)]);
    }
  }
  Literal tuple(inst.shape);
  tuple.elements()[0] = std::move(values);
  tuple.elements()[1] = std::move(positions);
  return tuple;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  return inst.opcode.opcode == Opcode::kSort ? EvalSort(ctx, inst, operands)
                                             : EvalTopK(ctx, inst, *operands[0]);
}

}  // namespace

OpFamily SortOps() { return {SortRules().takes, Eval}; }

}  // namespace hlocache::interp
