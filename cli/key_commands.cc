#include "cli/key_commands.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "client/local_commands.h"

namespace hlocache::cli {
namespace {

void AddKeyFlags(CLI::App* cmd, keying::KeySettings& settings, std::vector<std::string>& options) {
  cmd->add_option("--target", settings.target,
                  "where the executable runs: cpu-x86-64-v2|v3|v4, cuda-sm_80|sm_90, or any "
                  "other target name (default: this host's best cpu level)");
  cmd->add_option("--compiler-id", settings.compiler_id,
                  "toolchain and code generator that build it (default: this build's)");
  cmd->add_option("--option", options, "compile option k=v that changes the executable")
      ->type_name("K=V");
  cmd->add_flag("--allow-elided-constants", settings.allow_elided_constants,
                "key modules whose constants are elided as {...} (unsafe: their values are "
                "not part of the key)");
}

bool SplitOptions(const std::vector<std::string>& raw, keying::KeySettings& settings) {
  for (const std::string& kv : raw) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "hlocache: --option expects K=V, got '" << kv << "'\n";
      return false;
    }
    settings.options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return true;
}

}  // namespace

void AddKeyCommands(CLI::App& app, KeyCommands& c) {
  c.key = app.add_subcommand("key", "print 'KEY  FILE' for each HLO file ('-' = stdin)");
  AddKeyFlags(c.key, c.settings, c.raw_options);
  c.key->add_option("files", c.files, "HLO text files")->required();

  c.canon = app.add_subcommand("canon", "print the canonical text a key is computed from");
  AddKeyFlags(c.canon, c.settings, c.raw_options);
  c.canon->add_option("file", c.file_a, "HLO text file ('-' = stdin)")->required();

  c.why = app.add_subcommand("why", "explain why two HLO files get different keys (exit 0: same)");
  AddKeyFlags(c.why, c.settings, c.raw_options);
  c.why->add_option("a", c.file_a, "first HLO file")->required();
  c.why->add_option("b", c.file_b, "second HLO file")->required();
}

std::optional<int> RunKeyCommand(KeyCommands& c) {
  if (!*c.key && !*c.canon && !*c.why) return std::nullopt;
  if (!SplitOptions(c.raw_options, c.settings)) return 2;
  if (*c.key) return client::RunKey(c.files, c.settings, std::cout, std::cerr);
  if (*c.canon) return client::RunCanon(c.file_a, c.settings, std::cout, std::cerr);
  return client::RunWhy(c.file_a, c.file_b, c.settings, std::cout, std::cerr);
}

}  // namespace hlocache::cli
