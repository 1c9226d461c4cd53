// What checking an instruction's shapes may ask of its module: attributes, the computations it
// calls, and diagnostics that name the instruction's line. Shared by the reference interpreter
// (whose evaluation context extends it, compiler/interp/eval_context.h) and the code
// generators, so that a module is judged by one set of rules whichever reads it.
//
// Ownership: the context borrows the module, which must outlive it.
// Thread safety: const methods only read the module; use from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::interp {

// "FILE:LINE: 'NAME' (OPCODE)": an instruction as every diagnostic names it.
std::string InstructionLocation(const hlo::Module& module, const hlo::Instruction& inst);
// kInvalidArgument: "FILE:LINE: 'NAME' (OPCODE): WHY".
Status MalformedInstruction(const hlo::Module& module, const hlo::Instruction& inst,
                            const std::string& why);
// kFailedPrecondition: "FILE:LINE: WHO does not support WHAT (instruction 'NAME')".
Status UnsupportedInstruction(const hlo::Module& module, const hlo::Instruction& inst,
                              std::string_view who, const std::string& what);

// The shape checks of the op families: the module, for attributes and diagnostics.
class ShapeContext {
 public:
  explicit ShapeContext(const hlo::Module& module) : module_(module) {}
  virtual ~ShapeContext() = default;

  const hlo::Module& module() const { return module_; }

  // kFailedPrecondition: "FILE:LINE: hlocache does not support WHAT (instruction 'NAME')":
  // well-formed input outside what the interpreter and the code generator implement.
  Status Unsupported(const hlo::Instruction& inst, const std::string& what) const;
  // kInvalidArgument: "FILE:LINE: 'NAME' (OPCODE): WHY": the module contradicts itself (shapes
  // that do not follow from the op, attributes out of range).
  Status Malformed(const hlo::Instruction& inst, const std::string& why) const;

  // The integer list attribute `name` ({1,2,3} or one integer); kInvalidArgument when absent
  // or not integers.
  Result<std::vector<int64_t>> Ints(const hlo::Instruction& inst, const char* name) const;
  // The same, or `fallback` when the attribute is absent (a malformed value is still an error).
  Result<std::vector<int64_t>> IntsOr(const hlo::Instruction& inst, const char* name,
                                      std::vector<int64_t> fallback) const;
  // A single integer attribute, or `fallback` when absent.
  Result<int64_t> IntOr(const hlo::Instruction& inst, const char* name, int64_t fallback) const;
  // The raw text of attribute `name` (its tokens joined without spaces), or empty when absent.
  std::string AttributeText(const hlo::Instruction& inst, const char* name) const;

  // The computation the instruction calls through attribute `name` (to_apply=, condition=,
  // body=, comparator=, ...), as an index into module().computations; kInvalidArgument when the
  // attribute is absent or names no computation.
  Result<int32_t> Callee(const hlo::Instruction& inst, const char* name) const;

 private:
  const hlo::Module& module_;
};

}  // namespace hlocache::interp
