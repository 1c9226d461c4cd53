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
#include "compiler/semantics/entry_leaves.h"
#include "compiler/semantics/host_transfers.h"
#include "compiler/semantics/literal.h"

namespace hlocache::compiler {

// The dense row-major bytes of each array leaf of `arguments` (one per entry parameter, tuples
// flattened depth-first): the executables' inputs, a leaf of a dynamic shape laid out by its
// bounds and followed by its sizes (interp/dynamic_shapes.h). kInvalidArgument when they do not
// fit `leaves`.
Result<std::vector<std::string>> ArgumentBytes(const EntryLeaves& leaves,
                                               std::span<const interp::Literal> arguments);

// Runs `executable` on `arguments` (one per entry parameter) and returns each result leaf's
// dense row-major bytes (a dynamic result's at its sizes, as the interpreter's literal holds it).
// Its infeed, outfeed and host sends and recvs transfer with `host` (compiler/artifact/host_abi.h),
// borrowed for the call; without one they fail the run. kInvalidArgument when the arguments do not
// fit `leaves`; kResourceExhausted when the executable could not allocate its buffers; a transfer's
// failure as the host gave it, or kFailedPrecondition when there was no host.
Result<std::vector<std::string>> Execute(const LoadedExecutable& executable,
                                         const EntryLeaves& leaves,
                                         std::span<const interp::Literal> arguments,
                                         interp::HostTransfers* host = nullptr);

}  // namespace hlocache::compiler
