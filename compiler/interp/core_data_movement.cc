// The core ops that only move elements: slice, reverse, pad, concatenate,
// dynamic-slice and dynamic-update-slice.
#include "compiler/interp/evaluator.h"

namespace hlocache::interp::internal {

// The ops that only move elements: slice, reverse, pad, concatenate, dynamic-slice and
// dynamic-update-slice. Each output element names its source by index arithmetic.
Status Evaluator::MoveData(const Instruction& inst, const std::vector<Literal>& values,
                           Literal& out) {
  const Literal& in = values[inst.operands[0]];
  const auto& in_dims = in.shape().dims;
  const auto in_strides = hlo::RowMajorStrides(in_dims);
  const size_t rank = in_dims.size();
  const Opcode op = inst.opcode.opcode;
  // Dynamic start indices: clamped so the window stays inside the operand.
  std::vector<int64_t> starts(rank, 0);
  if (op == Opcode::kDynamicSlice || op == Opcode::kDynamicUpdateSlice) {
    const size_t first = op == Opcode::kDynamicSlice ? 1 : 2;
    if (inst.operands.size() != first + rank) {
      return Unsupported(inst, "dynamic slicing with one index operand");
    }
    const auto& window =
        op == Opcode::kDynamicSlice ? out.shape().dims : values[inst.operands[1]].shape().dims;
    for (size_t d = 0; d < rank; ++d) {
      const Literal& s = values[inst.operands[first + d]];
      const int64_t v = s.is_float() ? 0 : s.GetInt(0);
      starts[d] = std::clamp<int64_t>(v, 0, std::max<int64_t>(0, in_dims[d] - window[d]));
    }
  }
  if (op == Opcode::kDynamicUpdateSlice) {
    // In place when nothing else reads the operand (a loop's state), else on a copy.
    if (Literal* donated = Donated(inst, 0);
        donated != nullptr && hlo::SameValues(donated->shape(), out.shape())) {
      out = std::move(*donated);
    } else {
      for (size_t i = 0; i < out.size(); ++i) CopyElement(in, i, out, i);
    }
    const Literal& update = values[inst.operands[1]];
    const auto out_strides = hlo::RowMajorStrides(out.shape().dims);
    ForEachIndex(update, [&](size_t i, std::span<const int64_t> idx) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) off += (idx[d] + starts[d]) * out_strides[d];
      CopyElement(update, i, out, static_cast<size_t>(off));
    });
    return Status::Ok();
  }
  if (op == Opcode::kConcatenate) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
    if (dims.size() != 1) return Unsupported(inst, "concatenate without one dimension");
    const auto cd = static_cast<size_t>(dims[0]);
    ForEachIndex(out, [&](size_t i, std::span<const int64_t> idx) {
      int64_t pos = idx[cd];
      for (int32_t operand_index : inst.operands) {
        const Literal& part = values[operand_index];
        const int64_t extent = part.shape().dims[cd];
        if (pos < extent) {
          std::vector<int64_t> src(idx.begin(), idx.end());
          src[cd] = pos;
          CopyElement(part,
                      static_cast<size_t>(Offset(src, hlo::RowMajorStrides(part.shape().dims))),
                      out, i);
          return;
        }
        pos -= extent;
      }
    });
    return Status::Ok();
  }
  std::vector<int64_t> spec;
  std::vector<bool> reversed(rank, false);
  if (op == Opcode::kSlice) {
    HLOCACHE_ASSIGN_OR_RETURN(spec, SliceSpec(m_, inst));
    if (spec.size() != 3 * rank) return Unsupported(inst, "a slice of another rank");
  } else if (op == Opcode::kPad) {
    HLOCACHE_ASSIGN_OR_RETURN(spec, PaddingSpec(m_, inst));
    if (spec.size() != 3 * rank) return Unsupported(inst, "padding of another rank");
  } else if (op == Opcode::kReverse) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
    for (int64_t d : dims) reversed[static_cast<size_t>(d)] = true;
  }
  const Literal* pad_value = op == Opcode::kPad ? &values[inst.operands[1]] : nullptr;
  ForEachIndex(out, [&](size_t i, std::span<const int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t src = idx[d];
      if (op == Opcode::kSlice) {
        src = spec[3 * d] + idx[d] * spec[3 * d + 2];
      } else if (op == Opcode::kPad) {
        // Output position = low + src * (interior + 1); anything else is padding.
        const int64_t rel = idx[d] - spec[3 * d];
        const int64_t step = spec[3 * d + 2] + 1;
        if (rel < 0 || rel % step != 0 || rel / step >= in_dims[d]) {
          CopyElement(*pad_value, 0, out, i);
          return;
        }
        src = rel / step;
      } else if (op == Opcode::kReverse && reversed[d]) {
        src = in_dims[d] - 1 - idx[d];
      } else if (op == Opcode::kDynamicSlice) {
        src = starts[d] + idx[d];
      }
      off += src * in_strides[d];
    }
    CopyElement(in, static_cast<size_t>(off), out, i);
  });
  return Status::Ok();
}

}  // namespace hlocache::interp::internal
