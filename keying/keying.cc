#include "keying/keying.h"

#include "compiler/hlo/canonical_pipeline.h"
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

namespace {

hlo::CanonicalOptions CanonicalOptionsOf(const KeySettings& settings) {
  hlo::CanonicalOptions options;
  options.allow_elided_constants = settings.allow_elided_constants;
  options.record_source_lines = settings.record_source_lines;
  return options;
}

// The key of a canonical form, the settings' defaults resolved.
KeyedModule Compose(hlo::CanonicalModule canonical, const KeySettings& settings) {
  KeyedModule out;
  out.canonical = std::move(canonical);
  out.target = settings.target.empty() ? compiler::HostCpuTarget() : settings.target;
  out.compiler_id = settings.compiler_id.empty()
                        ? compiler::CompilerIdFor(out.target, compiler::DefaultCompilerId())
                        : settings.compiler_id;
  out.key = cache::ComposeKey(
      cache::KeyInput{out.canonical.text, out.target, out.compiler_id, settings.options});
  return out;
}

}  // namespace

Result<KeyedModule> KeyModule(const hlo::Module& module, const KeySettings& settings) {
  if (Status s = ValidateKeySettings(settings); !s.ok()) return Error(std::move(s));
  auto canonical = hlo::Canonicalize(module, CanonicalOptionsOf(settings));
  if (!canonical) return Error(canonical.error());
  return Compose(std::move(*canonical), settings);
}

Result<ParsedAndKeyed> ParseAndKey(std::string text, std::string filename,
                                   const KeySettings& settings) {
  // Settings are checked before the work but reported after parse errors, as KeyModule after
  // ParseModule would report them.
  Status settings_status = ValidateKeySettings(settings);
  if (!settings_status.ok()) {
    auto module = hlo::ParseModule(std::move(text), std::move(filename));
    if (!module) return Error(module.error());
    return Error(std::move(settings_status));
  }
  auto parsed =
      hlo::ParseAndCanonicalize(std::move(text), std::move(filename), CanonicalOptionsOf(settings));
  if (!parsed) return Error(parsed.error());
  KeyedModule keyed = Compose(std::move(parsed->canonical), settings);
  return ParsedAndKeyed{std::move(parsed->module), std::move(keyed)};
}

Result<KeyedModule> KeyFile(const std::string& path, const KeySettings& settings) {
  auto text = hlo::ReadModuleFile(path);
  if (!text) return Error(text.error());
  auto keyed = ParseAndKey(std::move(*text), hlo::ModuleFileName(path), settings);
  if (!keyed) return Error(keyed.error());
  return std::move(keyed->keyed);
}

}  // namespace hlocache::keying
