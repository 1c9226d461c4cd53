// The compiler id (what builds an executable) for each target (where it runs; the targets
// themselves are named in compiler/artifact/targets.h, which the runtime uses too).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "compiler/artifact/targets.h"

namespace hlocache::compiler {

// Names the toolchain, code generator version and optimization level whose output a key stands
// for: "gcc-12.2.0/hlocache-codegen-19/O2". A new code generator version bumps the number, so keys
// of old executables stop matching.
std::string DefaultCompilerId();

// Names NVRTC's version, the CUDA code generator's version and the flags every GPU executable is
// compiled with: "nvrtc-13.0/hlocache-cuda-3/fmad-off". "nvrtc-missing/..." where NVRTC cannot
// be loaded: such a host finds GPU executables built elsewhere only with an explicit compiler
// id (--compiler-id, or HLOCACHE_CUDA_COMPILER_ID for the client library).
std::string CudaCompilerId();

// The compiler id of executables for `target`: CudaCompilerId() for CUDA targets, `cpu_id`
// (the C++ toolchain's) for the rest.
std::string CompilerIdFor(std::string_view target, std::string_view cpu_id);

// The CUDA code generator's version and NVRTC flags, parts of CudaCompilerId(). The version is
// bumped whenever generated kernels or the launch plan change.
inline constexpr const char* kCudaCodegenVersion = "hlocache-cuda-3";
inline constexpr const char* kCudaFlags = "fmad-off";

// The code generator's version, part of every compiler id. Bumped whenever generated code or
// its calling convention changes, so that keys of older executables stop matching.
inline constexpr const char* kCodegenVersion = "hlocache-codegen-19";
// The optimization level every executable is compiled at, also part of the compiler id.
inline constexpr const char* kOptimization = "O2";
// What a CPU executable may need from the host that loads it, the compiler id's last part:
// glibc's vector math library (libmvec, glibc 2.35 or later) and a CBLAS library
// (compiler/artifact/blas_runtime.h). The loader refuses, with the reason, where one is missing.
inline constexpr const char* kCpuHostNeeds = "libmvec+cblas";

}  // namespace hlocache::compiler
