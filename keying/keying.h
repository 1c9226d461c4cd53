// From HLO text to a cache key: parse, canonicalize, compose. One folder below both the client
// and the server, so that every key is computed by the same code whoever computes it.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cache/key.h"
#include "common/status.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/module.h"

namespace hlocache::keying {

struct KeySettings {
  std::string target;       // Empty: the host's best CPU target.
  std::string compiler_id;  // Empty: compiler::DefaultCompilerId().
  std::vector<std::pair<std::string, std::string>> options;
  bool allow_elided_constants = false;
  bool record_source_lines = false;  // For diagnostics (`why`).
  // Keep the canonical text in KeyedModule::canonical (`canon`, `why`). Otherwise it is hashed
  // as it is printed and never held whole: the same key, without megabytes of text a large
  // module makes.
  bool keep_canonical_text = false;
};

struct KeyedModule {
  // Its text is empty unless KeySettings::keep_canonical_text.
  hlo::CanonicalModule canonical;
  cache::Key key;
  std::string target;       // As used, defaults resolved.
  std::string compiler_id;  // As used, defaults resolved.
};

// Validates settings (target, compiler id, options) without touching any module.
Status ValidateKeySettings(const KeySettings& settings);

Result<KeyedModule> KeyModule(const hlo::Module& module, const KeySettings& settings);

struct ParsedAndKeyed {
  hlo::Module module;
  KeyedModule keyed;
};

// ParseModule then KeyModule, with the same result and errors, in less time on a large text:
// the canonical form is built on a second thread as the parser goes
// (compiler/hlo/canonical_pipeline.h).
Result<ParsedAndKeyed> ParseAndKey(std::string text, std::string filename,
                                   const KeySettings& settings);

// ParseAndKey for a caller that wants only the key: the same key and errors, and the module is
// not kept. On a large text its instructions are freed while the second thread finishes the
// canonical form, rather than after the key (CanonicalizeText).
Result<KeyedModule> KeyText(std::string text, std::string filename, const KeySettings& settings);

// Reads the file ("-" for stdin), then keys it as KeyText does.
Result<KeyedModule> KeyFile(const std::string& path, const KeySettings& settings);

}  // namespace hlocache::keying
