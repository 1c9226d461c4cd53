// gather and scatter (the addressing both share is compiler/hlo/gather_scatter_dims.h).
//
// gather: result element r reads the operand at start + window, where the position is r's
// digits along the position dimensions, start is that position's start vector with each entry
// clamped to [0, operand extent - slice size] (so the slice stays inside the operand, as XLA
// clamps), and window is r's digits along offset_dims placed on the operand's window
// dimensions.
//
// scatter(operands..., indices, updates...): the results start as the operands; then every
// update element, in row-major order of the updates (which makes duplicate indices
// deterministic), combines with the result element it addresses through the update
// computation: (current values..., update values...) -> new values. Starts are not clamped: a
// window that does not lie wholly inside the operand is skipped, every element of it, as XLA
// does.
//
// Index values of any integer type are read as their mathematical value: u64 values past
// int64's range count as past any extent.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "compiler/hlo/gather_scatter_dims.h"
#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::SliceAddressing;

bool Next(std::vector<int64_t>& index, std::span<const int64_t> dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

int64_t Offset(std::span<const int64_t> index, std::span<const int64_t> strides) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
  return off;
}

void CopyScalar(const Literal& from, size_t i, Literal& to, size_t j) {
  if (from.is_float()) {
    to.SetFloat(j, from.GetFloat(i));
  } else {
    to.SetInt(j, from.GetInt(i));
  }
}

// An index value as the integer it denotes, saturated to int64.
int64_t IndexValue(const Literal& indices, size_t i) {
  const int64_t v = indices.GetInt(i);
  // A u64 past int64's range is held as its bit pattern, negative here.
  if (indices.type() == PrimitiveType::kU64 && v < 0) return std::numeric_limits<int64_t>::max();
  return v;
}

// The unclamped start vector (one entry per operand dimension) of the position with digits
// `digits`.
std::vector<int64_t> StartOf(const SliceAddressing& a, const Literal& indices,
                             std::span<const int64_t> digits, size_t operand_rank) {
  std::vector<int64_t> start(operand_rank, 0);
  const auto& idims = indices.shape().dims;
  std::vector<int64_t> at(idims.size(), 0);
  for (size_t k = 0; k < digits.size(); ++k) {
    at[static_cast<size_t>(a.index_position_dims[k])] = digits[k];
  }
  const auto strides = hlo::RowMajorStrides(idims);
  for (size_t e = 0; e < a.start_operand_dims.size(); ++e) {
    if (a.index_vector_dim < static_cast<int64_t>(idims.size())) {
      at[static_cast<size_t>(a.index_vector_dim)] = static_cast<int64_t>(e);
    }
    start[static_cast<size_t>(a.start_operand_dims[e])] =
        IndexValue(indices, static_cast<size_t>(Offset(at, strides)));
  }
  for (size_t j = 0; j < a.batching_operand_dims.size(); ++j) {
    start[static_cast<size_t>(a.batching_operand_dims[j])] =
        digits[static_cast<size_t>(a.batching_digits[j])];
  }
  return start;
}

// The extents of the position digits.
std::vector<int64_t> PositionExtents(const SliceAddressing& a, const Shape& indices) {
  std::vector<int64_t> extents;
  for (int64_t d : a.index_position_dims) extents.push_back(indices.dims[static_cast<size_t>(d)]);
  return extents;
}

Result<Literal> Gather(EvalContext& ctx, const Instruction& inst, const Literal& operand,
                       const Literal& indices) {
  auto a = hlo::GatherAddressing(ctx.module(), inst, operand.shape(), indices.shape());
  if (!a) return Error(ctx.Malformed(inst, a.error().message()));
  auto made = Literal::MakeZeros(inst.shape);
  if (!made) return Error(ctx.Unsupported(inst, made.error().message()));
  Literal out = std::move(*made);
  const auto& odims = operand.shape().dims;
  const auto ostrides = hlo::RowMajorStrides(odims);
  // The clamped start of every position, as an operand offset.
  const std::vector<int64_t> extents = PositionExtents(*a, indices.shape());
  std::vector<int64_t> starts;
  std::vector<int64_t> digits(extents.size(), 0);
  if (a->PositionCount(indices.shape()) > 0) {
    do {
      std::vector<int64_t> start = StartOf(*a, indices, digits, odims.size());
      for (size_t d = 0; d < odims.size(); ++d) {
        start[d] = std::clamp<int64_t>(start[d], 0, odims[d] - a->window_sizes[d]);
      }
      starts.push_back(Offset(start, ostrides));
    } while (Next(digits, extents));
  }
  if (out.size() == 0) return out;
  const auto& rdims = out.shape().dims;
  const auto position_strides = hlo::RowMajorStrides(extents);
  std::vector<int64_t> r(rdims.size(), 0);
  size_t i = 0;
  do {
    int64_t position = 0, off = 0;
    for (size_t k = 0; k < a->position_dims.size(); ++k) {
      position += r[static_cast<size_t>(a->position_dims[k])] * position_strides[k];
    }
    for (size_t k = 0; k < a->window_dims.size(); ++k) {
      off += r[static_cast<size_t>(a->window_dims[k])] *
             ostrides[static_cast<size_t>(a->window_operand_dims[k])];
    }
    CopyScalar(operand, static_cast<size_t>(starts[static_cast<size_t>(position)] + off), out, i++);
  } while (Next(r, rdims));
  return out;
}

Result<Literal> Scatter(EvalContext& ctx, const Instruction& inst,
                        std::span<const Literal* const> operands) {
  const size_t n = (operands.size() - 1) / 2;
  const Literal& indices = *operands[n];
  const Shape& ushape = operands[n + 1]->shape();
  // The operands updated in place when nothing else reads them (a loop's state).
  std::vector<Literal> results;
  for (size_t k = 0; k < n; ++k) {
    Literal* donated = ctx.Donated(inst, k);
    results.push_back(donated != nullptr ? std::move(*donated) : *operands[k]);
  }
  const Shape& oshape = results[0].shape();
  auto a = hlo::ScatterAddressing(ctx.module(), inst, oshape, indices.shape(), ushape);
  if (!a) return Error(ctx.Malformed(inst, a.error().message()));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t callee, ctx.Callee(inst, "to_apply"));
  const auto& odims = oshape.dims;
  const auto ostrides = hlo::RowMajorStrides(odims);
  // The start of every position as an operand offset, or -1 when its window is not wholly
  // inside the operand.
  const std::vector<int64_t> extents = PositionExtents(*a, indices.shape());
  std::vector<int64_t> starts;
  std::vector<int64_t> digits(extents.size(), 0);
  if (a->PositionCount(indices.shape()) > 0) {
    do {
      const std::vector<int64_t> start = StartOf(*a, indices, digits, odims.size());
      bool inside = true;
      for (size_t d = 0; d < odims.size(); ++d) {
        inside = inside && start[d] >= 0 && start[d] <= odims[d] - a->window_sizes[d];
      }
      starts.push_back(inside ? Offset(start, ostrides) : -1);
    } while (Next(digits, extents));
  }
  const auto& udims = ushape.dims;
  const auto position_strides = hlo::RowMajorStrides(extents);
  std::vector<Literal> args;
  for (size_t k = 0; k < 2 * n; ++k) args.emplace_back(ArrayShape(results[k % n].type()));
  std::vector<int64_t> u(udims.size(), 0);
  size_t i = 0;
  const bool any = std::all_of(udims.begin(), udims.end(), [](int64_t x) { return x > 0; });
  for (bool more = any; more; more = Next(u, udims), ++i) {
    int64_t position = 0, off = 0;
    for (size_t k = 0; k < a->position_dims.size(); ++k) {
      position += u[static_cast<size_t>(a->position_dims[k])] * position_strides[k];
    }
    const int64_t start = starts[static_cast<size_t>(position)];
    if (start < 0) continue;
    for (size_t k = 0; k < a->window_dims.size(); ++k) {
      off += u[static_cast<size_t>(a->window_dims[k])] *
             ostrides[static_cast<size_t>(a->window_operand_dims[k])];
    }
    const auto at = static_cast<size_t>(start + off);
    for (size_t k = 0; k < n; ++k) {
      CopyScalar(results[k], at, args[k], 0);
      CopyScalar(*operands[n + 1 + k], i, args[n + k], 0);
    }
    HLOCACHE_ASSIGN_OR_RETURN(Literal next, ctx.Call(callee, args));
    for (size_t k = 0; k < n; ++k) {
      CopyScalar(next.is_tuple() ? next.elements()[k] : next, 0, results[k], at);
    }
  }
  if (n == 1) return std::move(results[0]);
  Literal out(inst.shape);
  for (size_t k = 0; k < n; ++k) out.elements()[k] = std::move(results[k]);
  return out;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  if (inst.opcode.opcode == Opcode::kGather) {
    return Gather(ctx, inst, *operands[0], *operands[1]);
  }
  return Scatter(ctx, inst, operands);
}

}  // namespace

OpFamily GatherScatterOps() { return {GatherScatterRules().takes, Eval}; }

}  // namespace hlocache::interp
