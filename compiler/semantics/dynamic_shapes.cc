#include "compiler/semantics/dynamic_shapes.h"

#include <memory>
#include <string>

#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/dynamic_dims.h"

namespace hlocache::interp {
namespace dynamic {
HLOCACHE_DYNAMIC_DIMS_CODE
}  // namespace dynamic

using hlo::Opcode;
using hlo::Shape;

bool TakesDynamicShapes(Opcode op) {
  switch (op) {
    case Opcode::kParameter:
    case Opcode::kTuple:
    case Opcode::kGetTupleElement:
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kSetDimensionSize:
    case Opcode::kGetDimensionSize:
    case Opcode::kDynamicReshape:
      return true;
    default:
      return IsCoreElementwiseOp(op);
  }
}

Shape ArgumentShape(const Shape& declared) {
  Shape s = declared;
  if (s.IsTuple()) {
    for (Shape& e : s.tuple_elements) e = ArgumentShape(e);
    return s;
  }
  for (size_t k = 0; k < s.dims.size(); ++k) {
    if (s.IsDynamicDim(k) && s.dims[k] > 0) s.dims[k] -= s.dims[k] / 4;
  }
  s.dynamic.clear();
  return s;
}

bool Admits(const Shape& declared, const Shape& runtime) {
  if (declared.IsTuple() || runtime.IsTuple()) {
    if (declared.IsTuple() != runtime.IsTuple() ||
        declared.tuple_elements.size() != runtime.tuple_elements.size()) {
      return false;
    }
    for (size_t k = 0; k < declared.tuple_elements.size(); ++k) {
      if (!Admits(declared.tuple_elements[k], runtime.tuple_elements[k])) return false;
    }
    return true;
  }
  if (declared.type != runtime.type || declared.dims.size() != runtime.dims.size() ||
      runtime.IsDynamic()) {
    return false;
  }
  for (size_t k = 0; k < declared.dims.size(); ++k) {
    const bool fits = declared.IsDynamicDim(k)
                          ? runtime.dims[k] >= 0 && (declared.dims[k] == Shape::kUnboundedDim ||
                                                     runtime.dims[k] <= declared.dims[k])
                          : runtime.dims[k] == declared.dims[k];
    if (!fits) return false;
  }
  return true;
}

std::string WhyNotDynamic(const hlo::Instruction& inst, std::span<const Shape* const> operands) {
  const Opcode op = inst.opcode.opcode;
  if (!TakesDynamicShapes(op)) {
    return "dynamic dimensions in '" + std::string(hlo::OpcodeName(op)) + "'";
  }
  if (!hlo::HasDynamicLeaf(inst.shape) && op != Opcode::kGetDimensionSize && op != Opcode::kTuple &&
      op != Opcode::kGetTupleElement) {
    return "a static result of dynamic operands";
  }
  std::vector<const Shape*> leaves;
  hlo::AppendLeafShapes(inst.shape, leaves);
  for (const Shape* s : operands) hlo::AppendLeafShapes(*s, leaves);
  for (const Shape* leaf : leaves) {
    if (leaf->IsDynamic() && !leaf->BoundElementCount()) return "unbounded dynamic dimensions";
  }
  return "";
}

std::vector<SizeSource> ElementwiseSizeSources(const hlo::Instruction& inst,
                                               std::span<const Shape* const> declared) {
  const Shape& r = inst.shape;
  std::vector<SizeSource> out(r.dims.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!r.IsDynamicDim(i)) continue;
    for (size_t k = 0; k < declared.size(); ++k) {
      if (declared[k]->dims.size() == out.size() && declared[k]->IsDynamicDim(i)) {
        out[i] = {static_cast<int64_t>(k), static_cast<int64_t>(i)};
        break;
      }
    }
  }
  return out;
}

Result<std::vector<SizeSource>> SizeSources(const ShapeContext& ctx, const hlo::Instruction& inst,
                                            std::span<const Shape* const> declared) {
  const Shape& r = inst.shape;
  std::vector<SizeSource> out(r.dims.size());
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kBroadcast || op == Opcode::kTranspose) {
    // broadcast: operand dimension k is result dimension d[k]; transpose: result dimension k
    // is operand dimension d[k].
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
    const bool broadcast = op == Opcode::kBroadcast;
    if (declared.empty() || d.size() != (broadcast ? declared[0]->dims.size() : r.dims.size())) {
      return Error(ctx.Malformed(inst, "dimensions={...} does not match the shapes"));
    }
    for (size_t k = 0; k < d.size(); ++k) {
      const auto from = broadcast ? k : static_cast<size_t>(d[k]);
      const auto to = broadcast ? static_cast<size_t>(d[k]) : k;
      if (to < r.dims.size() && r.IsDynamicDim(to) && from < declared[0]->dims.size() &&
          declared[0]->IsDynamicDim(from)) {
        out[to] = {0, static_cast<int64_t>(from)};
      }
    }
    return out;
  }
  return ElementwiseSizeSources(inst, declared);
}

Result<std::vector<int64_t>> RuntimeDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                         std::span<const Shape* const> declared,
                                         std::span<const hlo::Dims* const> runtime) {
  const Shape& r = inst.shape;
  std::vector<int64_t> out(r.dims.begin(), r.dims.end());
  if (inst.opcode.opcode == Opcode::kReshape) {
    const Shape& in = *declared[0];
    // Flags as bool arrays, as the shared code takes them (std::vector<bool> has no data()).
    std::unique_ptr<bool[]> in_flags(new bool[in.dims.size() + 1]);
    std::unique_ptr<bool[]> out_flags(new bool[out.size() + 1]);
    for (size_t k = 0; k < in.dims.size(); ++k) in_flags[k] = in.IsDynamicDim(k);
    for (size_t k = 0; k < out.size(); ++k) out_flags[k] = r.IsDynamicDim(k);
    dynamic::hc_reshaped_dims(runtime[0]->data(), in_flags.get(),
                              static_cast<int64_t>(in.dims.size()), r.dims.data(), out_flags.get(),
                              static_cast<int64_t>(out.size()), out.data());
    return out;
  }
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<SizeSource> sources, SizeSources(ctx, inst, declared));
  for (size_t i = 0; i < out.size(); ++i) {
    const SizeSource& from = sources[i];
    if (from.operand >= 0) {
      out[i] = (*runtime[static_cast<size_t>(from.operand)])[static_cast<size_t>(from.dim)];
    }
  }
  return out;
}

int64_t ClampedSize(int64_t size, int64_t bound) { return dynamic::hc_clamp_dim(size, bound); }

}  // namespace hlocache::interp
