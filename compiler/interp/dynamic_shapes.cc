#include "compiler/interp/dynamic_shapes.h"

#include <memory>

#include "compiler/codegen/dynamic_dims.h"
#include "compiler/interp/interpreter.h"

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

Result<std::vector<int64_t>> RuntimeDims(const ShapeContext& ctx, const hlo::Instruction& inst,
                                         std::span<const Shape* const> declared,
                                         std::span<const std::vector<int64_t>* const> runtime) {
  const Shape& r = inst.shape;
  std::vector<int64_t> out = r.dims;
  switch (inst.opcode.opcode) {
    case Opcode::kBroadcast: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
      if (declared.empty() || d.size() != declared[0]->dims.size()) {
        return Error(ctx.Malformed(inst, "dimensions={...} does not match the operand's rank"));
      }
      for (size_t k = 0; k < d.size(); ++k) {
        const auto i = static_cast<size_t>(d[k]);
        if (i < out.size() && r.IsDynamicDim(i) && declared[0]->IsDynamicDim(k)) {
          out[i] = (*runtime[0])[k];
        }
      }
      return out;
    }
    case Opcode::kTranspose: {
      HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, ctx.Ints(inst, "dimensions"));
      if (declared.empty() || d.size() != out.size()) {
        return Error(ctx.Malformed(inst, "dimensions={...} is not a permutation of the result"));
      }
      for (size_t i = 0; i < out.size(); ++i) {
        const auto k = static_cast<size_t>(d[i]);
        if (r.IsDynamicDim(i) && k < declared[0]->dims.size() && declared[0]->IsDynamicDim(k)) {
          out[i] = (*runtime[0])[k];
        }
      }
      return out;
    }
    case Opcode::kReshape: {
      const Shape& in = *declared[0];
      // Flags as bool arrays, as the shared code takes them (std::vector<bool> has no data()).
      std::unique_ptr<bool[]> in_flags(new bool[in.dims.size() + 1]);
      std::unique_ptr<bool[]> out_flags(new bool[out.size() + 1]);
      for (size_t k = 0; k < in.dims.size(); ++k) in_flags[k] = in.IsDynamicDim(k);
      for (size_t k = 0; k < out.size(); ++k) out_flags[k] = r.IsDynamicDim(k);
      dynamic::hc_reshaped_dims(runtime[0]->data(), in_flags.get(),
                                static_cast<int64_t>(in.dims.size()), r.dims.data(),
                                out_flags.get(), static_cast<int64_t>(out.size()), out.data());
      return out;
    }
    default:  // Elementwise: the first operand dynamic in each dimension.
      for (size_t i = 0; i < out.size(); ++i) {
        if (!r.IsDynamicDim(i)) continue;
        for (size_t k = 0; k < declared.size(); ++k) {
          if (declared[k]->dims.size() == out.size() && declared[k]->IsDynamicDim(i)) {
            out[i] = (*runtime[k])[i];
            break;
          }
        }
      }
      return out;
  }
}

}  // namespace hlocache::interp
