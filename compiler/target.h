// Targets (where an executable runs) and the compiler id (what builds it).
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

// Names the toolchain, code generator version and optimization level whose output a key stands
// for: "gcc-12.2.0/hlocache-codegen-5/O2". A new code generator version bumps the number, so keys
// of old executables stop matching.
std::string DefaultCompilerId();

// The code generator's version, part of every compiler id. Bumped whenever generated code or
// its calling convention changes, so that keys of older executables stop matching.
inline constexpr const char* kCodegenVersion = "hlocache-codegen-5";
// The optimization level every executable is compiled at, also part of the compiler id.
inline constexpr const char* kOptimization = "O2";

}  // namespace hlocache::compiler
