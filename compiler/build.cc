#include "compiler/build.h"

#include <chrono>

#include "compiler/artifact/container.h"
#include "compiler/artifact/cuda_payload.h"
#include "compiler/artifact/graph_section.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/cuda/cuda_codegen.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/shape.h"
#include "compiler/target.h"

namespace hlocache::compiler {
namespace {

// The payload of a GPU target: the module's kernels built by NVRTC, and their launch plan.
Result<std::string> BuildCudaPayload(const hlo::Module& module, const std::string& target) {
  // The module's faults first: they hold wherever it is built.
  HLOCACHE_ASSIGN_OR_RETURN(CudaProgram program, LowerToCuda(module, CudaTargetArch(target)));
  HLOCACHE_ASSIGN_OR_RETURN(const Nvrtc* nvrtc, Nvrtc::Get());
  HLOCACHE_ASSIGN_OR_RETURN(
      std::string cubin,
      nvrtc->CompileToCubin(program.source, program.plan.arch, module.filename() + ".cu"));
  return EncodeCudaPayload(program.plan, cubin);
}

}  // namespace

Result<std::string> BuildArtifact(const hlo::Module& module, const Toolchain& toolchain,
                                  const BuildRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const std::string target = request.target.empty() ? HostCpuTarget() : request.target;
  ArtifactHeader header;
  std::string payload;
  if (IsCudaTarget(target)) {
    HLOCACHE_ASSIGN_OR_RETURN(payload, BuildCudaPayload(module, target));
    header.compiler_id = CudaCompilerId();
    header.payload_kind = std::string(kPayloadCubinPlan);
  } else {
    if (auto arch = TargetArchFlag(target); !arch) return Error(arch.error());
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> units,
                              LowerToCppUnits(module, request.lowering));
    HLOCACHE_ASSIGN_OR_RETURN(payload,
                              toolchain.CompileSharedObject(units, target, CpuUnitPrelude()));
    header.compiler_id = toolchain.CompilerId();
    header.payload_kind = std::string(kPayloadSharedObject);
    header.entry_symbol = kEntrySymbol;
  }
  const hlo::Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  header.key = request.key;
  header.target = target;
  for (int32_t p : entry.parameters) {
    header.parameter_shapes.push_back(
        hlo::CanonicalShapeText(entry.instructions[static_cast<size_t>(p)].shape));
  }
  header.result_shape =
      hlo::CanonicalShapeText(entry.instructions[static_cast<size_t>(entry.root)].shape);
  // The graph goes with the executable, so that a server can check the key it is stored under.
  if (auto canonical = hlo::Canonicalize(module)) header.graph_zstd = EncodeGraph(canonical->text);
  header.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return EncodeArtifact(header, payload);
}

}  // namespace hlocache::compiler
