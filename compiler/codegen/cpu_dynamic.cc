// set-dimension-size, get-dimension-size and dynamic-reshape (see compiler/interp/eval_dynamic.cc
// for their meaning): the sizes kept after a dynamic buffer's elements (cpu_source.h) read and
// written, the elements copied or relaid.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Shape& in = e.OperandShape(inst, 0);
  const Shape& r = inst.shape;
  const std::string x = e.Buffer(inst, 0);
  int64_t d = 0;
  if (inst.opcode.opcode != Opcode::kDynamicReshape) {
    auto dims = e.module().IntList(*inst.FindAttribute("dimensions"));  // Checked: one.
    d = (*dims)[0];
  }
  const std::string out = e.Materialize(index, inst);
  const std::string dim = std::to_string(d);
  switch (inst.opcode.opcode) {
    case Opcode::kGetDimensionSize:
      e.Emit("  {\n" + DeclareDims("in", x, in) + "    " + out + "[0] = static_cast<" +
             CType(r.type) + ">(in[" + dim + "]);\n  }\n");
      return Status::Ok();
    case Opcode::kSetDimensionSize:
      // The same layout (the result's bounds are the operand's dimensions): the elements as
      // they are, then dimension d's size clamped to the operand's.
      e.Emit("  {\n    std::memcpy(" + out + ", " + x + ", " + Int(DataBytes(r)) + ");\n" +
             DeclareDims("in", x, in) + "    in[" + dim + "] = hc_clamp_dim(static_cast<int64_t>(" +
             e.Buffer(inst, 1) + "[0]), in[" + dim + "]);\n" + SetDims(out, r, "in") + "  }\n");
      return Status::Ok();
    default: {  // dynamic-reshape.
      if (in.dims.size() > 64 || r.dims.size() > 64) {
        return e.Unsupported(inst, "a dynamic reshape of rank over 64");  // hc_relayout's bound.
      }
      std::string code = "  {\n" + DeclareDims("in", x, in) + IntArray("out_bounds", r.dims) +
                         "    int64_t dims[" + std::to_string(std::max<size_t>(r.dims.size(), 1)) +
                         "];\n";
      for (size_t k = 0; k < r.dims.size(); ++k) {
        const std::string at = std::to_string(k);
        code += "    dims[" + at + "] = " +
                (r.IsDynamicDim(k) ? "hc_clamp_dim(static_cast<int64_t>(" + e.Buffer(inst, k + 1) +
                                         "[0]), out_bounds[" + at + "])"
                                   : "out_bounds[" + at + "]") +
                ";\n";
      }
      const std::string in_rank = Int(static_cast<int64_t>(in.dims.size()));
      const std::string out_rank = Int(static_cast<int64_t>(r.dims.size()));
      e.Emit(code + "    hc_relayout(" + x + ", in_bounds, in, " + in_rank + ", " + out +
             ", out_bounds, dims, " + out_rank + ");\n" + SetDims(out, r, "dims") + "  }\n");
      return Status::Ok();
    }
  }
}

}  // namespace

CpuOpFamily CpuDynamicOps() { return {interp::DynamicRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
