// scaled-dot and ragged-dot (see compiler/interp/eval_dots.cc for their meaning).
//
// scaled-dot: each scaled operand is dequantized into a buffer of its common type (a loop over
// its elements, the scale read through a table of offsets), then the two go to hc_dot as dot's
// operands would. ragged-dot: one call of the prelude's hc_ragged_dot with the offset tables of
// compiler/semantics/dot_dims.h as constants.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/dot_dims.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

// Operand k dequantized by operand `scale` into a fresh buffer of `shape`: its leaf.
Leaf Dequantize(CpuEmitter& e, const Instruction& inst, size_t k, size_t scale,
                const Shape& shape) {
  const Shape& operand = e.OperandShape(inst, k);
  const Shape& scale_shape = e.OperandShape(inst, scale);
  if (scale_shape.dims.empty()) return {e.Buffer(inst, k), &operand};
  const std::string name = e.Fresh("deq");
  e.Declare(name, shape);
  // The operand's dimensions split into (scale dimension, block): the scale's offset is linear
  // in that index, its blocks not counted.
  std::vector<int64_t> sizes, strides;
  const auto ss = hlo::RowMajorStrides(scale_shape.dims);
  for (size_t d = 0; d < operand.dims.size(); ++d) {
    sizes.push_back(scale_shape.dims[d]);
    strides.push_back(ss[d]);
    // A dimension of no elements (and a scale of none) has blocks of any size: 1.
    sizes.push_back(scale_shape.dims[d] == 0 ? 1 : operand.dims[d] / scale_shape.dims[d]);
    strides.push_back(0);
  }
  const std::string t = CType(shape.type);
  e.Emit("  {\n" + IntArray("sizes", sizes) + IntArray("strides", strides) +
         "    const auto at = hc_offsets(" + std::to_string(sizes.size()) +
         ", sizes, strides);\n    if (!at) return 1;  // Out of memory.\n    for (int64_t i = 0; i "
         "< " +
         Int(ElementCount(operand)) + "; ++i) " + name + "[i] = hc_store<" + t +
         ">(hc_load(hc_cvt<" + t + ", " + CType(operand.type) + ">(" + e.Buffer(inst, k) +
         "[i])) * hc_load(hc_cvt<" + t + ", " + CType(scale_shape.type) + ">(" +
         e.Buffer(inst, scale) + "[at[i]])));\n  }\n");
  return {name, &shape};
}

Status LowerScaledDot(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Shape lhs = interp::DequantizedShape(e.OperandShape(inst, 0), e.OperandShape(inst, 2));
  const Shape rhs = interp::DequantizedShape(e.OperandShape(inst, 1), e.OperandShape(inst, 3));
  const Leaf l = Dequantize(e, inst, 0, 2, lhs);
  const Leaf r = Dequantize(e, inst, 1, 3, rhs);
  return e.EmitDot(index, inst, l, r);
}

Status LowerRaggedDot(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Shape& lhs = e.OperandShape(inst, 0);
  const Shape& rhs = e.OperandShape(inst, 1);
  const Shape& sizes = e.OperandShape(inst, 2);
  HLOCACHE_ASSIGN_OR_RETURN(
      interp::RaggedDotDims g,
      interp::ReadRaggedDotDims(interp::ShapeContext(e.module()), inst, lhs, rhs, sizes));
  const interp::RaggedDotTables t = interp::RaggedDotTablesOf(g, lhs.dims, rhs.dims, sizes.dims);
  const std::string out = e.Materialize(index, inst);
  auto count = [](std::span<const int64_t> v) { return Int(static_cast<int64_t>(v.size())); };
  e.Emit("  {\n" + IntArray("lb", t.lb) + IntArray("lf", t.lf) + IntArray("lc", t.lc) +
         IntArray("rb", t.rb) + IntArray("rf", t.rf) + IntArray("rc", t.rc) + IntArray("gb", t.gb) +
         IntArray("outer", t.outer) + IntArray("position", t.position) + "    if (!hc_ragged_dot(" +
         e.Buffer(inst, 0) + ", " + e.Buffer(inst, 1) + ", " + e.Buffer(inst, 2) + ", " + out +
         ", " + (g.contracting ? "true" : "false") + ", " + count(t.lb) + ", " + count(t.lf) +
         ", " + count(t.rf) + ", " + count(t.lc) + ", " + Int(g.groups) + ", " +
         Int(t.group_stride) + ", lb, lf, lc, rb, rf, rc, gb, outer, position)) return 1;\n  }\n" +
         WrapSubBytes(out, inst.shape));
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  if (inst.opcode.opcode == Opcode::kScaledDot) return LowerScaledDot(e, index, inst);
  return LowerRaggedDot(e, index, inst);
}

}  // namespace

CpuOpFamily CpuDotOps() { return {interp::DotRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
