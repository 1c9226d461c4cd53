// Running a loaded CPU executable on literals: the calling convention of the code generator
// (compiler/codegen/cpu_codegen.h) from the caller's side.
//
// Thread safety: as the executable; generated executables are reentrant.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/artifact/loader.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/interp/literal.h"

namespace hlocache::compiler {

// The dense row-major bytes of each array leaf of `arguments` (one per entry parameter, tuples
// flattened depth-first): the executables' inputs. kInvalidArgument when they do not fit
// `leaves`.
Result<std::vector<std::string>> ArgumentBytes(const EntryLeaves& leaves,
                                               std::span<const interp::Literal> arguments);

// Runs `executable` on `arguments` (one per entry parameter) and returns each result leaf's
// dense row-major bytes. kInvalidArgument when the arguments do not fit `leaves`;
// kResourceExhausted when the executable could not allocate its buffers.
Result<std::vector<std::string>> Execute(const LoadedExecutable& executable,
                                         const EntryLeaves& leaves,
                                         std::span<const interp::Literal> arguments);

}  // namespace hlocache::compiler
