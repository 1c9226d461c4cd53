// Elementwise ops beyond the core (see compiler/interp/eval_elementwise.cc for their meaning):
// each is one expression of the prelude in the fused elementwise loop, but for a
// bitcast-convert between types of different widths, which copies the operand's bytes.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;

// A bitcast-convert may change the element count; every other op of the family maps element i
// to element i.
bool Elementwise(Opcode op) {
  return interp::ElementwiseRules().takes(op) && op != Opcode::kBitcastConvert;
}

// The libm function of a transcendental op.
const char* MathFunction(Opcode op) {
  switch (op) {
    case Opcode::kCbrt:
      return "std::cbrt";
    case Opcode::kTan:
      return "std::tan";
    case Opcode::kErf:
      return "std::erf";
    case Opcode::kAcos:
      return "std::acos";
    case Opcode::kAcosh:
      return "std::acosh";
    case Opcode::kAsin:
      return "std::asin";
    case Opcode::kAsinh:
      return "std::asinh";
    case Opcode::kAtan:
      return "std::atan";
    case Opcode::kAtanh:
      return "std::atanh";
    case Opcode::kCosh:
      return "std::cosh";
    default:
      return "std::sinh";
  }
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const std::string t = CType(inst.shape.type);
  const std::string x = e.Read(inst, 0);
  switch (inst.opcode.opcode) {
    case Opcode::kPopulationCount:
      e.Elementwise(index, inst, "hc_popcnt<" + TypeAndWidth(inst.shape.type) + ">(" + x + ")");
      return Status::Ok();
    case Opcode::kStochasticConvert:
      e.Elementwise(index, inst,
                    "hc_stochastic_convert<" + t + ", " + CType(e.OperandShape(inst, 1).type) +
                        ", " + CType(e.OperandShape(inst, 0).type) + ">(" + x + ", " +
                        e.Read(inst, 1) + ")");
      return Status::Ok();
    case Opcode::kClz:
      e.Elementwise(index, inst, "hc_clz<" + TypeAndWidth(inst.shape.type) + ">(" + x + ")");
      return Status::Ok();
    case Opcode::kReducePrecision: {
      const hlo::Module& m = e.module();
      const int64_t exponent = *m.Int(*inst.FindAttribute("exponent_bits"));
      const int64_t mantissa = *m.Int(*inst.FindAttribute("mantissa_bits"));
      e.Elementwise(index, inst,
                    "hc_reduce_precision<" + t + ">(" + x + ", " + std::to_string(exponent) + ", " +
                        std::to_string(mantissa) + ")");
      return Status::Ok();
    }
    case Opcode::kBitcastConvert: {
      const hlo::Shape& in = e.OperandShape(inst, 0);
      if (hlo::PrimitiveTypeBits(in.type) == hlo::PrimitiveTypeBits(inst.shape.type)) {
        e.Elementwise(index, inst, "hc_bitcast<" + t + ">(" + x + ")");
        return Status::Ok();
      }
      // The same bytes in another shape: one copy.
      const std::string out = e.Materialize(index, inst);
      e.Emit("  std::memcpy(" + out + ", " + e.Buffer(inst, 0) + ", " + Int(ByteCount(inst.shape)) +
             ");\n");
      return Status::Ok();
    }
    default:
      e.Elementwise(
          index, inst,
          "hc_store<" + t + ">(" + MathFunction(inst.opcode.opcode) + "(hc_load(" + x + ")))");
      return Status::Ok();
  }
}

}  // namespace

CpuOpFamily CpuElementwiseOps() { return {interp::ElementwiseRules().takes, Elementwise, Lower}; }

}  // namespace hlocache::compiler
