// reduce, over one or several operands, and at once when its reducer is one associative
// binary op.
#include "compiler/interp/evaluator.h"

namespace hlocache::interp::internal {

// reduce(operands..., inits...), dimensions={...}, to_apply=f: each output element folds, in
// row-major order of the reduced dimensions, f over the inputs starting from the inits.
Status Evaluator::Reduce(const Instruction& inst, std::vector<Literal>& values, Literal& out) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, Ints(inst, "dimensions"));
  if (inst.callees.size() != 1 || inst.operands.size() % 2 != 0) {
    return Unsupported(inst, "this form of reduce");
  }
  const size_t n = inst.operands.size() / 2;
  const Literal& first = values[inst.operands[0]];
  const auto& in_dims = first.shape().dims;
  std::vector<bool> reduced(in_dims.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || static_cast<size_t>(d) >= in_dims.size()) return Unsupported(inst, "bad dims");
    reduced[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> kept_dims, red_dims;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(in_dims[d]);
  }
  Literal* outs[64];
  if (n > 64) return Unsupported(inst, "reduce of more than 64 operands");
  for (size_t k = 0; k < n; ++k) outs[k] = n == 1 ? &out : &out.elements()[k];
  const auto strides = hlo::RowMajorStrides(in_dims);
  bool swapped = false;
  const Literal& init = values[inst.operands[n]];
  if (n == 1 && first.size() > 0 && out.size() > 0 && init.type() == first.type() &&
      out.type() == first.type()) {
    if (const Instruction* op = OneBinaryOp(inst.callees[0], first.type(), swapped)) {
      return ReduceAllAtOnce(*op, swapped, first, init, reduced, strides, out);
    }
  }
  std::vector<int64_t> kept(kept_dims.size(), 0);
  size_t out_i = 0;
  bool more_out = true;
  while (more_out) {
    std::vector<Literal> acc;
    for (size_t k = 0; k < n; ++k) acc.push_back(values[inst.operands[n + k]]);
    std::vector<int64_t> red(red_dims.size(), 0);
    bool more_red = std::all_of(red_dims.begin(), red_dims.end(), [](int64_t d) { return d > 0; });
    while (more_red) {
      std::vector<int64_t> full(in_dims.size());
      for (size_t d = 0, ki = 0, ri = 0; d < in_dims.size(); ++d) {
        full[d] = reduced[d] ? red[ri++] : kept[ki++];
      }
      const auto off = static_cast<size_t>(Offset(full, strides));
      std::vector<Literal> call_args = acc;
      for (size_t k = 0; k < n; ++k) {
        const Literal& in = values[inst.operands[k]];
        Literal x(acc[k].shape());
        CopyElement(in, off, x, 0);
        call_args.push_back(std::move(x));
      }
      HLOCACHE_ASSIGN_OR_RETURN(Literal r, Call(inst.callees[0], call_args));
      if (n == 1) {
        acc[0] = std::move(r);
      } else {
        for (size_t k = 0; k < n; ++k) acc[k] = r.elements()[k];
      }
      more_red = !red_dims.empty() && Next(red, red_dims);
    }
    if (outs[0]->size() > 0) {
      for (size_t k = 0; k < n; ++k) CopyElement(acc[k], 0, *outs[k], out_i);
    }
    ++out_i;
    more_out = !kept_dims.empty() && out_i < outs[0]->size() && Next(kept, kept_dims);
  }
  return Status::Ok();
}

// The root of computation `c` when it is nothing but one associative binary op on its two
// scalar parameters of type `t` (the usual add, max, min ... reducer); null otherwise.
// `swapped`: the op takes the second parameter (the element) first.
const Instruction* Evaluator::OneBinaryOp(int32_t c, PrimitiveType t, bool& swapped) const {
  const Computation& comp = m_.computations[static_cast<size_t>(c)];
  if (comp.instructions.size() != 3 || comp.parameters.size() != 2 || comp.root < 0) {
    return nullptr;
  }
  const Instruction& root = comp.instructions[static_cast<size_t>(comp.root)];
  switch (root.opcode.opcode) {
    case Opcode::kAdd:
    case Opcode::kMultiply:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
      break;
    default:
      return nullptr;
  }
  if (root.opcode.phase != hlo::AsyncPhase::kNone || root.operands.size() != 2) return nullptr;
  const int32_t acc = comp.parameters[0], elem = comp.parameters[1];
  if (root.operands[0] == acc && root.operands[1] == elem) {
    swapped = false;
  } else if (root.operands[0] == elem && root.operands[1] == acc) {
    swapped = true;
  } else {
    return nullptr;
  }
  for (const Instruction& inst : comp.instructions) {
    if (!inst.has_shape() || inst.shape.type != t || inst.shape.IsTuple() ||
        !inst.shape.dims.empty()) {
      return nullptr;
    }
  }
  return &root;
}

// reduce with a one-op reducer (see OneBinaryOp), over all results at once: one pass of
// the op per step of the reduced dimensions, in their row-major order. Each result goes
// through the same steps as under the definition, one element at a time.
Status Evaluator::ReduceAllAtOnce(const Instruction& op, bool swapped, const Literal& in,
                                  const Literal& init, const std::vector<bool>& reduced,
                                  std::span<const int64_t> strides, Literal& out) const {
  const auto& in_dims = in.shape().dims;
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < in_dims.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(in_dims[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  std::vector<size_t> kept_offsets;
  kept_offsets.reserve(out.size());
  std::vector<int64_t> kept(kept_dims.size(), 0);
  do {
    kept_offsets.push_back(static_cast<size_t>(Offset(kept, kept_strides)));
  } while (!kept.empty() && Next(kept, kept_dims));
  if (kept_offsets.size() != out.size()) return Unsupported(op, "this reduce's shapes");
  Shape row;
  row.type = out.type();
  row.dims = {static_cast<int64_t>(out.size())};
  Literal acc(row), next(row), elements(row);
  for (size_t j = 0; j < acc.size(); ++j) CopyElement(init, 0, acc, j);
  std::vector<int64_t> red(red_dims.size(), 0);
  do {
    const auto red_offset = static_cast<size_t>(Offset(red, red_strides));
    for (size_t j = 0; j < elements.size(); ++j) {
      CopyElement(in, kept_offsets[j] + red_offset, elements, j);
    }
    HLOCACHE_RETURN_IF_ERROR(swapped ? Binary(op, elements, acc, next)
                                     : Binary(op, acc, elements, next));
    std::swap(acc, next);
  } while (!red.empty() && Next(red, red_dims));
  for (size_t j = 0; j < out.size(); ++j) CopyElement(acc, j, out, j);
  return Status::Ok();
}

}  // namespace hlocache::interp::internal
