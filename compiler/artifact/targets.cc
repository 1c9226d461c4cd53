#include "compiler/artifact/targets.h"

namespace hlocache::compiler {

std::string HostCpuTarget() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // Feature names both GCC and clang know; the psABI levels add a few more that every CPU with
  // these has.
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  if (v4) return "cpu-x86-64-v4";
  if (v3) return "cpu-x86-64-v3";
#endif
  return "cpu-x86-64-v2";
}

int CpuTargetLevel(std::string_view target) {
  constexpr std::string_view kPrefix = "cpu-x86-64-v";
  if (!target.starts_with(kPrefix) || target.size() != kPrefix.size() + 1) return 0;
  const char level = target.back();
  return (level >= '2' && level <= '4') ? level - '0' : 0;
}

bool IsCudaTarget(std::string_view target) {
  return target == "cuda-sm_80" || target == "cuda-sm_90";
}

}  // namespace hlocache::compiler
