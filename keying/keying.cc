#include "keying/keying.h"

#include <optional>

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

// Hashes the canonical text into a key as it is printed, when the text is not to be kept.
class KeySink final : public hlo::CanonicalTextSink {
 public:
  void Begin(uint64_t text_bytes) override { key_.emplace(text_bytes); }
  void Append(std::string_view piece) override { key_->Append(piece); }
  // The key of the text the sink took; an error when it took none or not all it was told of.
  Result<cache::Key> Finish(const KeyedModule& keyed, const KeySettings& settings) {
    if (!key_) return Error(Internal("no canonical text was printed to key"));
    return key_->Finish(keyed.target, keyed.compiler_id, settings.options);
  }

 private:
  std::optional<cache::StreamedKey> key_;
};

hlo::CanonicalOptions CanonicalOptionsOf(const KeySettings& settings, KeySink* sink) {
  hlo::CanonicalOptions options;
  options.allow_elided_constants = settings.allow_elided_constants;
  options.record_source_lines = settings.record_source_lines;
  if (!settings.keep_canonical_text) options.text_sink = sink;
  return options;
}

// The key of a canonical form (its text, or what `sink` took of it when the text was not kept),
// the settings' defaults resolved.
Result<KeyedModule> Compose(hlo::CanonicalModule canonical, KeySink& sink,
                            const KeySettings& settings) {
  KeyedModule out;
  out.canonical = std::move(canonical);
  out.target = settings.target.empty() ? compiler::HostCpuTarget() : settings.target;
  out.compiler_id = settings.compiler_id.empty()
                        ? compiler::CompilerIdFor(out.target, compiler::DefaultCompilerId())
                        : settings.compiler_id;
  if (settings.keep_canonical_text) {
    out.key = cache::ComposeKey(
        cache::KeyInput{out.canonical.text, out.target, out.compiler_id, settings.options});
    return out;
  }
  auto key = sink.Finish(out, settings);
  if (!key) return Error(key.error());
  out.key = std::move(*key);
  return out;
}

// Settings are checked before the work but reported after parse errors, as KeyModule after
// ParseModule would report them: the text is parsed for its errors alone.
ErrorValue RefusedSettings(std::string text, std::string filename, Status refused) {
  auto module = hlo::ParseModule(std::move(text), std::move(filename));
  if (!module) return Error(module.error());
  return Error(std::move(refused));
}

}  // namespace

Result<KeyedModule> KeyModule(const hlo::Module& module, const KeySettings& settings) {
  if (Status s = ValidateKeySettings(settings); !s.ok()) return Error(std::move(s));
  KeySink sink;
  auto canonical = hlo::Canonicalize(module, CanonicalOptionsOf(settings, &sink));
  if (!canonical) return Error(canonical.error());
  return Compose(std::move(*canonical), sink, settings);
}

Result<ParsedAndKeyed> ParseAndKey(std::string text, std::string filename,
                                   const KeySettings& settings) {
  if (Status s = ValidateKeySettings(settings); !s.ok()) {
    return RefusedSettings(std::move(text), std::move(filename), std::move(s));
  }
  KeySink sink;
  auto parsed = hlo::ParseAndCanonicalize(std::move(text), std::move(filename),
                                          CanonicalOptionsOf(settings, &sink));
  if (!parsed) return Error(parsed.error());
  auto keyed = Compose(std::move(parsed->canonical), sink, settings);
  if (!keyed) return Error(keyed.error());
  return ParsedAndKeyed{std::move(parsed->module), std::move(*keyed)};
}

Result<KeyedModule> KeyText(std::string text, std::string filename, const KeySettings& settings) {
  if (Status s = ValidateKeySettings(settings); !s.ok()) {
    return RefusedSettings(std::move(text), std::move(filename), std::move(s));
  }
  KeySink sink;
  auto canonical = hlo::CanonicalizeText(std::move(text), std::move(filename),
                                         CanonicalOptionsOf(settings, &sink));
  if (!canonical) return Error(canonical.error());
  return Compose(std::move(*canonical), sink, settings);
}

Result<KeyedModule> KeyFile(const std::string& path, const KeySettings& settings) {
  auto text = hlo::ReadModuleFile(path);
  if (!text) return Error(text.error());
  return KeyText(std::move(*text), hlo::ModuleFileName(path), settings);
}

}  // namespace hlocache::keying
