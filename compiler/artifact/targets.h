// The targets an executable is built for: `cpu-x86-64-v2` to `-v4` and `cuda-sm_80`,
// `cuda-sm_90`, and which of them this host runs. Below the compile driver, so that the runtime
// that loads artifacts (loader.h) can ask without the driver.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace hlocache::compiler {

// The best `cpu-x86-64-vN` level this host runs (v2 at least on x86-64).
std::string HostCpuTarget();

// N for the CPU targets the code generator builds, "cpu-x86-64-v2" to "-v4"; 0 for anything else.
int CpuTargetLevel(std::string_view target);

// Whether `target` is a GPU target the CUDA code generator builds: cuda-sm_80 or cuda-sm_90.
bool IsCudaTarget(std::string_view target);

}  // namespace hlocache::compiler
