#include "compiler/target.h"

#include <cstdlib>

#include "compiler/cuda/nvrtc.h"

namespace hlocache::compiler {

std::string DefaultCompilerId() {
#if defined(__clang__)
  std::string toolchain = "clang-" + std::to_string(__clang_major__) + "." +
                          std::to_string(__clang_minor__) + "." +
                          std::to_string(__clang_patchlevel__);
#else
  std::string toolchain = "gcc-" + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) +
                          "." + std::to_string(__GNUC_PATCHLEVEL__);
#endif
  return toolchain + "/" + kCodegenVersion + "/" + kOptimization + "/" + kCpuHostNeeds;
}

std::string CudaCompilerId() {
  if (const char* id = std::getenv("HLOCACHE_CUDA_COMPILER_ID"); id != nullptr && *id != 0) {
    return id;
  }
  auto nvrtc = Nvrtc::Get();
  return "nvrtc-" + (nvrtc ? (*nvrtc)->version() : std::string("missing")) + "/" +
         kCudaCodegenVersion + "/" + kCudaFlags;
}

std::string CompilerIdFor(std::string_view target, std::string_view cpu_id) {
  return IsCudaTarget(target) ? CudaCompilerId() : std::string(cpu_id);
}

}  // namespace hlocache::compiler
