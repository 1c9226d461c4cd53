#include "compiler/build.h"

#include <chrono>

#include "compiler/artifact/container.h"
#include "compiler/artifact/graph_section.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/shape.h"
#include "compiler/target.h"

namespace hlocache::compiler {

Result<std::string> BuildArtifact(const hlo::Module& module, const Toolchain& toolchain,
                                  const BuildRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const std::string target = request.target.empty() ? HostCpuTarget() : request.target;
  if (auto arch = TargetArchFlag(target); !arch) return Error(arch.error());
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> units,
                            LowerToCppUnits(module, request.lowering));
  HLOCACHE_ASSIGN_OR_RETURN(std::string shared_object,
                            toolchain.CompileSharedObject(units, target));
  const hlo::Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  ArtifactHeader header;
  header.key = request.key;
  header.target = target;
  header.compiler_id = toolchain.CompilerId();
  header.payload_kind = std::string(kPayloadSharedObject);
  header.entry_symbol = kEntrySymbol;
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
  return EncodeArtifact(header, shared_object);
}

}  // namespace hlocache::compiler
