#include "compiler/codegen/cpu_codegen.h"

#include "compiler/codegen/cpu_lowering.h"

namespace hlocache::compiler {

using lowering_internal::Lowering;

const std::string& CpuUnitPrelude() {
  static const std::string* const prelude = new std::string(
      std::string(kCpuPrelude) + "namespace hlocache_rt {\n" + kHalfSource + "\n" + kPrngSource +
      "\n" + kLinalgSource + "\n" + kCpuLinalgPrelude + kDynamicDimsSource + "\n" +
      kCpuDynamicPrelude + "}  // namespace hlocache_rt\n");
  return *prelude;
}

Result<std::vector<std::string>> LowerToCppUnits(const hlo::Module& module,
                                                 const CpuLoweringOptions& options) {
  return Lowering(module, options).Run();
}

Result<std::string> LowerToCpp(const hlo::Module& module) {
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> units, LowerToCppUnits(module));
  std::string out;
  for (size_t u = 0; u < units.size(); ++u) {
    if (units.size() > 1) out += "// ---- translation unit " + std::to_string(u) + "\n";
    out += units[u];
  }
  return out;
}

}  // namespace hlocache::compiler
