#include "keying/keying.h"

#include "compiler/hlo/parser.h"
#include "compiler/target.h"

namespace hlocache::keying {

Status ValidateKeySettings(const KeySettings& settings) {
  if (!settings.target.empty()) {
    if (Status s = cache::ValidateTarget(settings.target); !s.ok()) return s;
  }
  if (!settings.compiler_id.empty()) {
    if (Status s = cache::ValidateCompilerId(settings.compiler_id); !s.ok()) return s;
  }
  for (const auto& [k, v] : settings.options) {
    if (Status s = cache::ValidateOption(k, v); !s.ok()) return s;
  }
  return Status::Ok();
}

Result<KeyedModule> KeyModule(const hlo::Module& module, const KeySettings& settings) {
  if (Status s = ValidateKeySettings(settings); !s.ok()) return Error(std::move(s));
  hlo::CanonicalOptions options;
  options.allow_elided_constants = settings.allow_elided_constants;
  options.record_source_lines = settings.record_source_lines;
  auto canonical = hlo::Canonicalize(module, options);
  if (!canonical) return Error(canonical.error());
  KeyedModule out;
  out.canonical = std::move(*canonical);
  out.target = settings.target.empty() ? compiler::HostCpuTarget() : settings.target;
  out.compiler_id = settings.compiler_id.empty()
                        ? compiler::CompilerIdFor(out.target, compiler::DefaultCompilerId())
                        : settings.compiler_id;
  out.key = cache::ComposeKey(
      cache::KeyInput{out.canonical.text, out.target, out.compiler_id, settings.options});
  return out;
}

Result<KeyedModule> KeyFile(const std::string& path, const KeySettings& settings) {
  auto module = hlo::ParseModuleFile(path);
  if (!module) return Error(module.error());
  return KeyModule(*module, settings);
}

}  // namespace hlocache::keying
