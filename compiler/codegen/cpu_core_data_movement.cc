// The core ops that move data, lowered: constants, copies by affine index maps (reshape,
// transpose, broadcast, slice, reverse), dynamic reshape, pad, concatenate and
// dynamic-update-slice.
#include "compiler/codegen/cpu_lowering.h"

namespace hlocache::compiler::lowering_internal {

// A constant is an array at namespace scope, so that every segment of its computation (see
// cpu_units.h) can read it: a small one is defined in every unit, a large one in one.
Status Lowering::Constant(int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(interp::Literal value, interp::ConstantValue(m_, inst));
  if (value.is_tuple()) return Unsupported(inst, "tuple constants");
  const std::string t = CType(inst.shape.type);
  const std::string name =
      "hc_k" + std::to_string(comp_ - m_.computations.data()) + "_" + std::to_string(index);
  const std::string array =
      t + " " + name + "[" + std::to_string(std::max<size_t>(value.size(), 1)) + "]";
  std::string values = " = {";
  for (size_t e = 0; e < value.size(); ++e) {
    if (e) values += (e % 8 == 0) ? ",\n    " : ", ";
    values += ElementLiteral(value, e);
  }
  values += "};\n";
  if (value.size() <= kSmallConstantElements) {
    small_constants_ += "static const " + array + values;
  } else {
    pieces_.push_back({"extern const " + array + ";\n", "extern const " + array + values});
  }
  values_[static_cast<size_t>(index)] = {{name, &inst.shape}};
  constant_types_[name] = "const " + t + "*";
  return Status::Ok();
}

// broadcast, transpose, slice, reverse, dynamic-slice: element d of the result reads the
// operand at base + sum(d_k * coefficient_k).
Status Lowering::AffineCopy(int32_t index, const Instruction& inst) {
  const auto& od = inst.shape.dims;
  const auto& id = OperandShape(inst, 0).dims;
  std::vector<int64_t> coef;
  std::string base;
  const std::string out = Materialize(index, inst);
  Body() += "  {\n";
  if (inst.opcode.opcode == Opcode::kDynamicSlice) {
    base = DynamicStarts(inst, 1, od);
    coef = hlo::RowMajorStrides(id);
  } else {
    HLOCACHE_ASSIGN_OR_RETURN(AffineRead read, AffineReadOf(m_, inst, id));
    base = Int(read.base);
    coef = std::move(read.coefficients);
  }
  Body() += "    int64_t o = 0;\n";
  Body() += NestedLoops(od, out + "[o++] = " + Buffer(inst, 0) + "[" + Affine(base, coef) + "];");
  Body() += "  }\n";
  if (inst.shape.IsDynamic()) {
    HLOCACHE_ASSIGN_OR_RETURN(
        std::vector<interp::SizeSource> sources,
        interp::SizeSources(interp::ShapeContext(m_), inst, OperandShapes(inst)));
    ResultSizes(inst, sources, out);
  }
  return Status::Ok();
}

// A reshape from or to a dynamic shape: the operand's elements at their sizes, in row-major
// order, relaid in the result's sizes (dynamic_dims.h's rule), zeros past the operand's end.
Status Lowering::DynamicReshape(int32_t index, const Instruction& inst) {
  const Shape& in = OperandShape(inst, 0);
  const Shape& r = inst.shape;
  if (in.dims.size() > kMaxRelayoutRank || r.dims.size() > kMaxRelayoutRank) {
    return Unsupported(inst, "a dynamic reshape of rank over 64");
  }
  const std::string out = Materialize(index, inst);
  const std::string in_rank = Int(static_cast<int64_t>(in.dims.size()));
  const std::string out_rank = Int(static_cast<int64_t>(r.dims.size()));
  Body() += "  {\n" + DeclareDims("in", Buffer(inst, 0), in) + IntArray("out_bounds", r.dims) +
            BoolArray("in_dynamic", DynamicFlags(in)) + BoolArray("out_dynamic", DynamicFlags(r)) +
            "    int64_t dims[" + std::to_string(std::max<size_t>(r.dims.size(), 1)) + "];\n" +
            "    hc_reshaped_dims(in, in_dynamic, " + in_rank + ", out_bounds, out_dynamic, " +
            out_rank + ", dims);\n    hc_relayout(" + Buffer(inst, 0) + ", in_bounds, in, " +
            in_rank + ", " + out + ", out_bounds, dims, " + out_rank + ");\n" +
            SetDims(out, r, "dims") + "  }\n";
  return Status::Ok();
}

Status Lowering::Pad(int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, interp::PaddingSpec(m_, inst));
  const auto& od = inst.shape.dims;
  const auto& id = OperandShape(inst, 0).dims;
  const auto os = hlo::RowMajorStrides(od);
  const std::string out = Materialize(index, inst);
  Body() += "  {\n    for (int64_t i = 0; i < " + Int(Count(inst.shape)) + "; ++i) " + out +
            "[i] = " + Buffer(inst, 1) + "[0];\n    int64_t o = 0;\n";
  // Each operand element lands at low + d * (interior + 1), when that is inside the result.
  std::string inside = "true", target = "0";
  for (size_t k = 0; k < id.size(); ++k) {
    const std::string q = "(" + Int(spec[3 * k]) + " + d" + std::to_string(k) + " * " +
                          Int(spec[3 * k + 2] + 1) + ")";
    inside += " && " + q + " >= 0 && " + q + " < " + Int(od[k]);
    target += " + " + q + " * " + Int(os[k]);
  }
  Body() += NestedLoops(
      id, "{ if (" + inside + ") " + out + "[" + target + "] = " + Buffer(inst, 0) + "[o]; ++o; }");
  Body() += "  }\n";
  return Status::Ok();
}

Status Lowering::Concatenate(int32_t index, const Instruction& inst) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntList(inst, "dimensions"));
  const auto cd = static_cast<size_t>(dims[0]);
  const auto& od = inst.shape.dims;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < cd; ++k) outer *= od[k];
  for (size_t k = cd + 1; k < od.size(); ++k) inner *= od[k];
  const std::string out = Materialize(index, inst);
  const std::string t = CType(inst.shape.type);
  Body() += "  for (int64_t o = 0; o < " + Int(outer) + "; ++o) {\n    " + t + "* dst = " + out +
            " + o * " + Int(od[cd] * inner) + ";\n";
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const int64_t row = OperandShape(inst, k).dims[cd] * inner;
    if (row == 0) continue;
    Body() += "    std::memcpy(dst, " + Buffer(inst, k) + " + o * " + Int(row) + ", sizeof(" + t +
              ") * " + Int(row) + ");\n    dst += " + Int(row) + ";\n";
  }
  Body() += "  }\n";
  return Status::Ok();
}

Status Lowering::DynamicUpdateSlice(int32_t index, const Instruction& inst) {
  const auto& ud = OperandShape(inst, 1).dims;
  const std::string out = Materialize(index, inst);
  Body() +=
      "  std::memcpy(" + out + ", " + Buffer(inst, 0) + ", " + Int(Bytes(inst.shape)) + ");\n  {\n";
  const std::string base = DynamicStarts(inst, 2, ud);
  Body() += "    int64_t o = 0;\n";
  Body() += NestedLoops(ud, out + "[" + Affine(base, hlo::RowMajorStrides(inst.shape.dims)) +
                                "] = " + Buffer(inst, 1) + "[o++];");
  Body() += "  }\n";
  return Status::Ok();
}

}  // namespace hlocache::compiler::lowering_internal
