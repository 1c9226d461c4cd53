#include "compiler/cuda/cuda_codegen.h"

#include "compiler/cuda/cuda_lowering.h"
#include "compiler/cuda/cuda_prelude.h"
#include "compiler/semantics/half.h"

namespace hlocache::compiler {

using cuda_lowering_internal::CudaLowering;

const std::string& CudaUnitPrelude() {
  static const std::string* const prelude =
      new std::string(std::string(kCudaPrelude) + "\n" + kHalfSource + "\n");
  return *prelude;
}

std::string CudaTargetArch(std::string_view target) {
  if (target == "cuda-sm_80") return "sm_80";
  if (target == "cuda-sm_90") return "sm_90";
  return "";
}

Result<CudaProgram> LowerToCuda(const hlo::Module& module, std::string_view arch) {
  if (arch != "sm_80" && arch != "sm_90") {
    return Error(InvalidArgument("no CUDA architecture " + std::string(arch) +
                                 " (the targets are cuda-sm_80 and cuda-sm_90)"));
  }
  return CudaLowering(module, std::string(arch)).Run();
}

}  // namespace hlocache::compiler
