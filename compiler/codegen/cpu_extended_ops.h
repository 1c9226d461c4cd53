// The ops the CPU code generator lowers outside its core (cpu_codegen.h lists the core): each
// family lives in a file of its own (cpu_*.cc) and is reached through this dispatch. Shapes
// are checked before a family is called, by the interpreter's rules for the op
// (interp::CheckShapes), so a family may index by them.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "compiler/codegen/cpu_emitter.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

// One family of ops.
struct CpuOpFamily {
  bool (*takes)(hlo::Opcode op);
  // Whether `op` computes element i of its array result from element i of each operand, so
  // that its operands may be fused into its loop and it into its user's (such ops lower through
  // CpuEmitter::Elementwise).
  bool (*elementwise)(hlo::Opcode op);
  // Lowers instruction `index` (`inst`) of the computation being written.
  Status (*lower)(CpuEmitter& emitter, int32_t index, const hlo::Instruction& inst);
};

// The families, in the order they are asked (each opcode belongs to one).
std::span<const CpuOpFamily> CpuOpFamilies();

// Whether one of the families lowers `op`.
bool IsExtendedCpuOp(hlo::Opcode op);
// Whether `op` is an extended op that lowers elementwise (see CpuOpFamily::elementwise).
bool IsElementwiseExtendedCpuOp(hlo::Opcode op);
// Lowers an extended op; kFailedPrecondition for ops no family takes.
Status LowerExtendedCpuOp(CpuEmitter& emitter, int32_t index, const hlo::Instruction& inst);

}  // namespace hlocache::compiler
