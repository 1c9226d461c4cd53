// reduce-window and select-and-scatter: ops that slide a window over their operand (the
// window's geometry is compiler/hlo/window.h).
//
// reduce-window(x0, ..., xn-1, init0, ..., initn-1), window=..., to_apply=f: result element o
// (one per window placement) starts from the inits and folds in, in row-major order of the
// window's elements, every element the window reads at o (those on holes and in the padding
// are skipped): (acc0, ..., accn-1) = f(acc0, ..., accn-1, x0[i], ..., xn-1[i]). The result is
// an array per operand, of the inits' types (a tuple when n > 1).
//
// select-and-scatter(operand, source, init), window=..., select=s, scatter=g: the result starts
// as init everywhere, in the operand's shape. For each source element, in row-major order, the
// window placed at its position selects one operand element: the first it reads, replaced by
// each later one c for which s(selected, c) is false (s = GE picks the first maximum). Then
// result[selected] = g(source element, result[selected]), the argument order of XLA's
// evaluator. A window that reads nothing scatters nothing.
//
// Both run every result's steps in lockstep, one window element at a time, so that each step
// is one evaluation of the computation over arrays (EvalContext::CallElementwise): the same
// steps in the same order as the definition, without a call per element.
#include <string>

#include "compiler/hlo/window.h"
#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::WindowDimension;

void CopyElement(const Literal& from, size_t i, Literal& to, size_t j) {
  if (to.is_float()) {
    to.SetFloat(j, from.GetFloat(i));
  } else {
    to.SetInt(j, from.GetInt(i));
  }
}

// Steps through the row-major indices of `dims`; false after the last (or for no elements).
bool Next(std::vector<int64_t>& index, std::span<const int64_t> dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

bool Empty(std::span<const int64_t> dims) {
  for (int64_t d : dims) {
    if (d == 0) return true;
  }
  return false;
}

// The window over a base of dimensions `base`, placed at each result index.
struct Sliding {
  std::vector<WindowDimension> window;
  std::vector<int64_t> base, base_strides, placements, sizes;

  // The offset in the base of window element `k` placed at `at`, or -1 when it reads nothing.
  int64_t Offset(std::span<const int64_t> at, std::span<const int64_t> k) const {
    int64_t offset = 0;
    for (size_t d = 0; d < base.size(); ++d) {
      const std::optional<int64_t> i = hlo::WindowBaseIndex(window[d], base[d], at[d], k[d]);
      if (!i) return -1;
      offset += *i * base_strides[d];
    }
    return offset;
  }
};

Result<Sliding> Slide(const ShapeContext& ctx, const Instruction& inst,
                      std::span<const int64_t> base) {
  Sliding s;
  HLOCACHE_RETURN_IF_ERROR(ReadWindowPlacements(ctx, inst, base, s.window, s.placements));
  s.base.assign(base.begin(), base.end());
  s.base_strides = hlo::RowMajorStrides(base);
  for (const WindowDimension& w : s.window) s.sizes.push_back(w.size);
  return s;
}

// For window element `k` (a row-major index into the window), the results whose window reads
// an element there and the offsets of those elements in the base.
void Reads(const Sliding& s, std::span<const int64_t> k, std::vector<size_t>& results,
           std::vector<size_t>& offsets) {
  results.clear();
  offsets.clear();
  std::vector<int64_t> at(s.placements.size(), 0);
  size_t j = 0;
  do {
    if (const int64_t offset = s.Offset(at, k); offset >= 0) {
      results.push_back(j);
      offsets.push_back(static_cast<size_t>(offset));
    }
    ++j;
  } while (Next(at, s.placements));
}

// The elements of `from` at `picks`, as a rank-1 array.
Literal Gather(const Literal& from, const std::vector<size_t>& picks) {
  Literal row(ArrayShape(from.type(), {static_cast<int64_t>(picks.size())}));
  for (size_t r = 0; r < picks.size(); ++r) CopyElement(from, picks[r], row, r);
  return row;
}

// Every result's fold advances one window element at a time, all results at once: for window
// element k, one evaluation of the reducer over the results that read an element there.
Result<Literal> ReduceWindow(EvalContext& ctx, const Instruction& inst,
                             std::span<const Literal* const> operands) {
  const size_t n = operands.size() / 2;
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  HLOCACHE_ASSIGN_OR_RETURN(Sliding s, Slide(ctx, inst, operands[0]->shape().dims));
  std::vector<Literal> outs;
  for (size_t k = 0; k < n; ++k) {
    outs.emplace_back(ArrayShape(operands[n + k]->type(), s.placements));
    for (size_t j = 0; j < outs[k].size(); ++j) CopyElement(*operands[n + k], 0, outs[k], j);
  }
  std::vector<size_t> results, offsets;
  std::vector<int64_t> k(s.sizes.size(), 0);
  if (!Empty(s.placements)) {
    do {
      Reads(s, k, results, offsets);
      if (results.empty()) continue;
      std::vector<Literal> args;
      for (size_t q = 0; q < n; ++q) args.push_back(Gather(outs[q], results));
      for (size_t q = 0; q < n; ++q) args.push_back(Gather(*operands[q], offsets));
      HLOCACHE_ASSIGN_OR_RETURN(Literal next, ctx.CallElementwise(f, args));
      for (size_t q = 0; q < n; ++q) {
        const Literal& row = next.is_tuple() ? next.elements()[q] : next;
        for (size_t r = 0; r < results.size(); ++r) CopyElement(row, r, outs[q], results[r]);
      }
    } while (Next(k, s.sizes));
  }
  if (n == 1) return std::move(outs[0]);
  Literal tuple(inst.shape);
  for (size_t q = 0; q < n; ++q) tuple.elements()[q] = std::move(outs[q]);
  return tuple;
}

// Every source's selection advances one window element at a time, all sources at once. The
// scatters then go in rounds: each round takes, for every selected element, the first source
// (in source order) not yet scattered there, so that sources selecting one element still
// combine into it in source order.
Result<Literal> SelectAndScatter(EvalContext& ctx, const Instruction& inst,
                                 std::span<const Literal* const> operands) {
  const Literal& operand = *operands[0];
  const Literal& source = *operands[1];
  HLOCACHE_ASSIGN_OR_RETURN(int32_t select, ctx.Callee(inst, "select"));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t scatter, ctx.Callee(inst, "scatter"));
  HLOCACHE_ASSIGN_OR_RETURN(Sliding s, Slide(ctx, inst, operand.shape().dims));
  Literal out(operand.shape());
  for (size_t i = 0; i < out.size(); ++i) CopyElement(*operands[2], 0, out, i);
  if (Empty(s.placements)) return out;
  std::vector<int64_t> selected(source.size(), -1);
  std::vector<size_t> results, offsets, contenders, contender_offsets, incumbents;
  std::vector<int64_t> k(s.sizes.size(), 0);
  do {
    Reads(s, k, results, offsets);
    contenders.clear();
    contender_offsets.clear();
    incumbents.clear();
    for (size_t r = 0; r < results.size(); ++r) {
      int64_t& sel = selected[results[r]];
      if (sel < 0) {
        sel = static_cast<int64_t>(offsets[r]);
      } else {
        contenders.push_back(results[r]);
        contender_offsets.push_back(offsets[r]);
        incumbents.push_back(static_cast<size_t>(sel));
      }
    }
    if (contenders.empty()) continue;
    const Literal args[] = {Gather(operand, incumbents), Gather(operand, contender_offsets)};
    HLOCACHE_ASSIGN_OR_RETURN(Literal keep, ctx.CallElementwise(select, args));
    for (size_t r = 0; r < contenders.size(); ++r) {
      if (keep.GetInt(r) == 0) selected[contenders[r]] = static_cast<int64_t>(contender_offsets[r]);
    }
  } while (Next(k, s.sizes));

  std::vector<size_t> pending, later, round, targets;
  for (size_t j = 0; j < selected.size(); ++j) {
    if (selected[j] >= 0) pending.push_back(j);
  }
  std::vector<bool> taken(out.size(), false);
  while (!pending.empty()) {
    round.clear();
    later.clear();
    targets.clear();
    for (size_t j : pending) {
      const auto target = static_cast<size_t>(selected[j]);
      if (taken[target]) {
        later.push_back(j);
      } else {
        taken[target] = true;
        round.push_back(j);
        targets.push_back(target);
      }
    }
    const Literal args[] = {Gather(source, round), Gather(out, targets)};
    HLOCACHE_ASSIGN_OR_RETURN(Literal combined, ctx.CallElementwise(scatter, args));
    for (size_t r = 0; r < targets.size(); ++r) {
      CopyElement(combined, r, out, targets[r]);
      taken[targets[r]] = false;
    }
    pending.swap(later);
  }
  return out;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  return inst.opcode.opcode == Opcode::kReduceWindow ? ReduceWindow(ctx, inst, operands)
                                                     : SelectAndScatter(ctx, inst, operands);
}

}  // namespace

OpFamily WindowOps() { return {WindowRules().takes, Eval}; }

}  // namespace hlocache::interp
