// What lowering one instruction to C++ may ask of the CPU code generator: the values of its
// operands (as buffers), fresh buffers for its results, the body of the function being
// written, and the names of the functions of the computations it calls.
//
// The core ops are lowered inside cpu_codegen.cc; the other op families (cpu_*.cc, dispatched
// by cpu_extended_ops.h) see the code generator only through this interface.
//
// The model: every computation becomes one C++ function taking one pointer per array leaf of
// its parameters, then one per array leaf of its result (cpu_codegen.h). Inside it, each
// instruction's value is a list of leaves, each a pointer expression to a dense row-major
// buffer. Values are never written after they are defined, so a value may share its operand's
// buffers (Bind) instead of copying them.
//
// Ownership: the emitter outlives every call; returned references stay valid until the next
// call that defines a value.
// Thread safety: one lowering at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

// An array value held in a buffer: a C++ expression for a pointer to its first element.
struct Leaf {
  std::string ptr;
  const hlo::Shape* shape;
};

class CpuEmitter {
 public:
  virtual ~CpuEmitter() = default;

  virtual const hlo::Module& module() const = 0;
  // The computation whose function is being written.
  virtual const hlo::Computation& computation() const = 0;

  const hlo::Instruction& Operand(const hlo::Instruction& inst, size_t k) const {
    return computation().instructions[static_cast<size_t>(inst.operands[k])];
  }
  const hlo::Shape& OperandShape(const hlo::Instruction& inst, size_t k) const {
    return Operand(inst, k).shape;
  }

  // The leaves of the value of instruction `i` (of the computation being written), depth-first.
  // Every operand of the instruction being lowered has its leaves in buffers, unless it was
  // fused into this instruction's elementwise loop (only elementwise users see those: Read).
  virtual const std::vector<Leaf>& Leaves(int32_t i) const = 0;
  // The buffer of operand `k`, an array.
  std::string Buffer(const hlo::Instruction& inst, size_t k) const {
    return Leaves(inst.operands[k])[0].ptr;
  }
  // All the leaves of operand `k` (a tuple's, flattened).
  const std::vector<Leaf>& OperandLeaves(const hlo::Instruction& inst, size_t k) const {
    return Leaves(inst.operands[k]);
  }

  // Appends C++ statements to the body of the function being written (indented by two spaces,
  // each line ending in a newline).
  virtual void Emit(std::string_view code) = 0;
  // Appends a loop split across the executable's threads (prelude/hc_cpu_threads.h): `loop`
  // is statements running over [lo, hi) of [0, count), in pieces of at least `grain`. It may
  // name the function's buffers and the module's constants (they are passed to it), the
  // module's functions, and its own locals, nothing else of the function; it may
  // `return 1` on failure, which the function then returns once every piece is done.
  virtual void SplitLoop(int64_t count, int64_t grain, const std::string& loop) = 0;
  // Declares a fresh buffer named `name` for an array of shape `s`: on the stack when small, on
  // the heap otherwise (the function returns 1 when the allocation fails).
  virtual void Declare(const std::string& name, const hlo::Shape& s) = 0;
  // Declares a fresh pointer variable `name`, a `const T*` (T the C type of `s`) that this
  // instruction's code assigns and may change (a loop's state swapping between buffers), and
  // that later instructions may read as a leaf. `may_point_to` lists every pointer expression
  // it may hold: the buffers they name stay allocated while the variable is in use.
  virtual void DeclarePointer(const std::string& name, const hlo::Shape& s,
                              std::vector<std::string> may_point_to) = 0;
  // Declares one fresh buffer per leaf of `inst`'s shape and makes them its value.
  virtual const std::vector<Leaf>& MaterializeLeaves(int32_t index,
                                                     const hlo::Instruction& inst) = 0;
  // The same for an array-shaped instruction; returns its buffer's name.
  std::string Materialize(int32_t index, const hlo::Instruction& inst) {
    return MaterializeLeaves(index, inst)[0].ptr;
  }
  // Makes `leaves` (buffers of earlier values) the value of instruction `index`, without a copy.
  virtual void Bind(int32_t index, std::vector<Leaf> leaves) = 0;

  // Defines array instruction `index` elementwise by `expr`, a C++ expression of its element at
  // the loop index `i` (int64_t): fused into its user's loop where possible, else a loop
  // writing a buffer of its own.
  virtual void Elementwise(int32_t index, const hlo::Instruction& inst,
                           const std::string& expr) = 0;
  // Element `i` of operand `k` inside such an expression: the operand's fused expression or a
  // load from its buffer.
  virtual std::string Read(const hlo::Instruction& inst, size_t k) const = 0;

  // Defines array instruction `index` as dot's result (its dimension numbers and result shape)
  // on the arrays `lhs` and `rhs`, which need not be its operands (scaled-dot's dequantized
  // ones): hc_dot, as the core op dot is lowered.
  virtual Status EmitDot(int32_t index, const hlo::Instruction& inst, const Leaf& lhs,
                         const Leaf& rhs) = 0;

  // The name of the C++ function of computation `computation` (an index into
  // module().computations): `int NAME(const T0* p0, ..., R0* r0, ...)`, returning 0, or 1
  // when out of memory. Every computation an instruction calls is lowered to one. Result
  // buffers must not overlap parameter buffers, with one exception: when leaf j of the root is a
  // parameter leaf handed on unchanged, result pointer j may be that parameter's own pointer,
  // and the function then leaves it untouched (a loop's state passed through, cpu_control.cc).
  virtual std::string FunctionName(int32_t computation) const = 0;
  // A name not used before in this function, starting with `prefix`.
  virtual std::string Fresh(std::string_view prefix) = 0;

  // kFailedPrecondition: "FILE:LINE: the CPU code generator does not support WHAT (instruction
  // 'NAME')".
  virtual Status Unsupported(const hlo::Instruction& inst, const std::string& what) const = 0;
  // kInvalidArgument: "FILE:LINE: 'NAME' (OPCODE): WHY".
  virtual Status Malformed(const hlo::Instruction& inst, const std::string& why) const = 0;
};

}  // namespace hlocache::compiler
