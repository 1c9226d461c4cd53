// The core ops that move data, as CUDA kernels: copies by affine index maps (reshape, transpose,
// broadcast, slice, reverse), pad, concatenate and dynamic-update-slice.
#include "compiler/cuda/cuda_lowering.h"

namespace hlocache::compiler::cuda_lowering_internal {

// Statements declaring d0, d1, ... as the row-major digits of `linear` over `dims`.
std::string CudaLowering::DigitsOf(const std::string& linear, std::span<const int64_t> dims) {
  std::string out = "    int64_t r_ = " + linear + ";\n";
  for (size_t k = dims.size(); k-- > 0;) {
    const std::string d = "d" + std::to_string(k);
    if (k == 0) {
      out += "    const int64_t " + d + " = r_;\n";
    } else {
      out += "    const int64_t " + d + " = r_ % " + Num(dims[k]) + ";\n    r_ /= " + Num(dims[k]) +
             ";\n";
    }
  }
  return out + "    (void)r_;\n";
}

std::string CudaLowering::AffineOf(const std::string& base, std::span<const int64_t> coef) {
  std::string out = base;
  for (size_t k = 0; k < coef.size(); ++k) {
    if (coef[k] != 0) out += " + d" + std::to_string(k) + " * " + Num(coef[k]);
  }
  return out;
}

// broadcast, transpose, slice, reverse, dynamic-slice: result element d reads the operand at
// base + sum(d_k * coefficient_k).
Status CudaLowering::AffineCopy(Frame& f, int32_t index, const Instruction& inst) {
  const auto& od = inst.shape.dims;
  const auto& id = OperandShape(f, inst, 0).dims;
  std::vector<int64_t> coef;
  std::string prologue, base;
  std::set<int64_t> reads;
  if (inst.opcode.opcode == Opcode::kDynamicSlice) {
    const auto is = hlo::RowMajorStrides(id);
    prologue = DynamicStarts(f, inst, 1, od, reads);
    base = "0";
    for (size_t d = 0; d < id.size(); ++d) {
      base += " + s" + std::to_string(d) + " * " + Num(is[d]);
    }
    coef = is;
  } else {
    HLOCACHE_ASSIGN_OR_RETURN(AffineRead read, AffineReadOf(m_, inst, id));
    base = Num(read.base);
    coef = std::move(read.coefficients);
  }
  Val out = NewArray(inst);
  const Expr src = At(Operand(f, inst, 0), AffineOf(base, coef));
  reads.insert(src.buffers.begin(), src.buffers.end());
  Launch({out.buffer}, reads, ElementCount(inst.shape),
         prologue + DigitsOf("i", od) + "    " + B(out.buffer) + "[i] = " + src.code + ";\n");
  f.values[static_cast<size_t>(index)] = {std::move(out)};
  return Status::Ok();
}

Status CudaLowering::Pad(Frame& f, int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, interp::PaddingSpec(m_, inst));
  const auto& od = inst.shape.dims;
  const auto& id = OperandShape(f, inst, 0).dims;
  const auto is = hlo::RowMajorStrides(id);
  // Result element d holds operand element q when d = low + q * (interior + 1).
  std::string body = DigitsOf("i", od) + "    bool in_ = true;\n    int64_t src_ = 0;\n";
  for (size_t k = 0; k < od.size(); ++k) {
    const std::string q = "q" + std::to_string(k);
    const int64_t step = spec[3 * k + 2] + 1;
    body += "    const int64_t " + q + " = d" + std::to_string(k) + " - (" + Num(spec[3 * k]) +
            ");\n    in_ = in_ && " + q + " >= 0 && " + q + " % " + Num(step) + " == 0 && " + q +
            " / " + Num(step) + " < " + Num(id[k]) + ";\n    src_ += (" + q + " / " + Num(step) +
            ") * " + Num(is[k]) + ";\n";
  }
  const Expr src = At(Operand(f, inst, 0), "src_");
  const Expr pad = At(Operand(f, inst, 1), "0");
  std::set<int64_t> reads = src.buffers;
  reads.insert(pad.buffers.begin(), pad.buffers.end());
  Val out = NewArray(inst);
  Launch({out.buffer}, reads, ElementCount(inst.shape),
         body + "    " + B(out.buffer) + "[i] = in_ ? " + src.code + " : " + pad.code + ";\n");
  f.values[static_cast<size_t>(index)] = {std::move(out)};
  return Status::Ok();
}

Status CudaLowering::Concatenate(Frame& f, int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntList(inst, "dimensions"));
  const auto cd = static_cast<size_t>(dims[0]);
  const auto& od = inst.shape.dims;
  int64_t inner = 1;
  for (size_t k = cd + 1; k < od.size(); ++k) inner *= od[k];
  const int64_t row = od[cd] * inner;
  Val out = NewArray(inst);
  std::string body = "    const int64_t o_ = i / " + Num(row) + ", c_ = (i % " + Num(row) + ") / " +
                     Num(inner) + ", n_ = i % " + Num(inner) + ";\n";
  std::set<int64_t> reads;
  int64_t start = 0;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const int64_t size = OperandShape(f, inst, k).dims[cd];
    if (size == 0) continue;
    const Expr src = At(Operand(f, inst, k), "o_ * " + Num(size * inner) + " + (c_ - " +
                                                 Num(start) + ") * " + Num(inner) + " + n_");
    reads.insert(src.buffers.begin(), src.buffers.end());
    body += "    " + std::string(start == 0 ? "" : "else ") + "if (c_ < " + Num(start + size) +
            ") " + B(out.buffer) + "[i] = " + src.code + ";\n";
    start += size;
  }
  Launch({out.buffer}, reads, ElementCount(inst.shape), body);
  f.values[static_cast<size_t>(index)] = {std::move(out)};
  return Status::Ok();
}

Status CudaLowering::DynamicUpdateSlice(Frame& f, int32_t index, const Instruction& inst) {
  const auto& od = inst.shape.dims;
  const auto& ud = OperandShape(f, inst, 1).dims;
  const auto us = hlo::RowMajorStrides(ud);
  std::set<int64_t> reads;
  std::string body = DynamicStarts(f, inst, 2, ud, reads) + DigitsOf("i", od) +
                     "    bool in_ = true;\n    int64_t src_ = 0;\n";
  for (size_t k = 0; k < od.size(); ++k) {
    const std::string q = "(d" + std::to_string(k) + " - s" + std::to_string(k) + ")";
    body += "    in_ = in_ && " + q + " >= 0 && " + q + " < " + Num(ud[k]) + ";\n    src_ += " + q +
            " * " + Num(us[k]) + ";\n";
  }
  const Expr base = At(Operand(f, inst, 0), "i");
  const Expr update = At(Operand(f, inst, 1), "src_");
  reads.insert(base.buffers.begin(), base.buffers.end());
  reads.insert(update.buffers.begin(), update.buffers.end());
  Val out = NewArray(inst);
  Launch({out.buffer}, reads, ElementCount(inst.shape),
         body + "    " + B(out.buffer) + "[i] = in_ ? " + update.code + " : " + base.code + ";\n");
  f.values[static_cast<size_t>(index)] = {std::move(out)};
  return Status::Ok();
}

}  // namespace hlocache::compiler::cuda_lowering_internal
