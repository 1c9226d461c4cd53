// One module to one artifact: lower to C++ and compile with the system toolchain (CPU targets),
// or lower to CUDA and compile with NVRTC (cuda-sm_80, cuda-sm_90: no GPU needed), then wrap in
// the artifact container (schema/artifact-container.md). This is what a compile worker does, in its
// own process (compiler/worker_pool.h).
//
// Thread safety: pure function of its inputs; compiles may run concurrently.
#pragma once

#include <string>

#include "common/status.h"
#include "compiler/codegen/cpu_units.h"
#include "compiler/hlo/module.h"
#include "compiler/toolchain.h"

namespace hlocache::compiler {

struct BuildRequest {
  std::string key;     // Stored in the artifact's header; the caller computed it.
  std::string target;  // cpu-x86-64-v2|v3|v4 or cuda-sm_80|90; empty for this host's best CPU.
  // How the generated code is cut into functions and units: the executable computes the same
  // whatever they are (tests cut as finely as possible to check that).
  CpuLoweringOptions lowering;
};

// The artifact's bytes. Errors: those of LowerToCpp or LowerToCuda (kFailedPrecondition for what
// the code generator does not support, kInvalidArgument for malformed modules), then those of
// Toolchain::CompileSharedObject, or of Nvrtc::Get (NVRTC missing) and CompileToCubin.
Result<std::string> BuildArtifact(const hlo::Module& module, const Toolchain& toolchain,
                                  const BuildRequest& request);

}  // namespace hlocache::compiler
