// The `hlocache` command. Flags are parsed with CLI11; each subcommand is a function in
// client/commands.h. Exit status: 0 success, 1 explained failure, 2 bad usage.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "client/commands.h"

namespace {

void AddKeyFlags(CLI::App* cmd, hlocache::client::KeySettings& settings,
                 std::vector<std::string>& options) {
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

bool SplitOptions(const std::vector<std::string>& raw, hlocache::client::KeySettings& settings) {
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

int Main(int argc, char** argv) {
  using namespace hlocache::client;
  CLI::App app{"hlocache: a persistent compilation cache for HLO modules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hlocache 0.1.0");

  KeySettings settings;
  std::vector<std::string> raw_options;
  std::vector<std::string> files;
  std::string file_a, file_b;

  CLI::App* key = app.add_subcommand("key", "print 'KEY  FILE' for each HLO file ('-' = stdin)");
  AddKeyFlags(key, settings, raw_options);
  key->add_option("files", files, "HLO text files")->required();

  CLI::App* canon = app.add_subcommand("canon", "print the canonical text a key is computed from");
  AddKeyFlags(canon, settings, raw_options);
  canon->add_option("file", file_a, "HLO text file ('-' = stdin)")->required();

  CLI::App* why =
      app.add_subcommand("why", "explain why two HLO files get different keys (exit 0: same)");
  AddKeyFlags(why, settings, raw_options);
  why->add_option("a", file_a, "first HLO file")->required();
  why->add_option("b", file_b, "second HLO file")->required();

  std::string store_dir, max_size;
  CLI::App* stats = app.add_subcommand("stats", "entries, bytes and counters of a local store");
  stats->add_option("--dir", store_dir, "store directory")->required();
  CLI::App* verify = app.add_subcommand(
      "verify", "verify every entry of a local store; quarantine corrupt ones (exit 1 if any)");
  verify->add_option("--dir", store_dir, "store directory")->required();
  CLI::App* gc =
      app.add_subcommand("gc", "evict least-recently-used entries of a local store to a size");
  gc->add_option("--dir", store_dir, "store directory")->required();
  gc->add_option("--max-size", max_size, "size to shrink to: bytes, or with K, M, G, T")
      ->required();

  CompileSettings compile_settings;
  RunSettings run_settings;
  WorkerSettings worker_settings;
  auto add_compile_flags = [&](CLI::App* cmd) {
    cmd->add_option("--target", compile_settings.target,
                    "cpu-x86-64-v2|v3|v4 (default: this host's best level)");
    cmd->add_option("--cxx", compile_settings.cxx, "the C++ compiler to build with")
        ->capture_default_str();
    cmd->add_option("--timeout", compile_settings.timeout_seconds,
                    "seconds before the compile is killed")
        ->capture_default_str();
  };
  CLI::App* compile =
      app.add_subcommand("compile", "compile an HLO module into an executable artifact");
  add_compile_flags(compile);
  compile->add_option("file", file_a, "HLO text file ('-' = stdin)")->required();
  compile->add_option("-o,--output", compile_settings.output,
                      "where to write the artifact (default: KEY.hloart)");

  CLI::App* run = app.add_subcommand(
      "run", "compile an HLO module, run it on generated inputs, and print its results' checksums");
  add_compile_flags(run);
  run->add_option("file", file_a, "HLO text file ('-' = stdin)")->required();
  run->add_option("--inputs", run_settings.inputs, "random or zeros")->capture_default_str();
  run->add_option("--seed", run_settings.seed, "seed for random inputs")->capture_default_str();
  run->add_flag("--check", run_settings.check,
                "compare with the reference interpreter (exit 1 on a mismatch)");
  run->add_option("--artifact", run_settings.artifact, "run this artifact instead of compiling");

  CLI::App* worker = app.add_subcommand("compile-worker", "");  // Internal: the pool's child.
  worker->group("");
  worker->add_option("--input", worker_settings.input)->required();
  worker->add_option("--output", worker_settings.output)->required();
  worker->add_option("--key", worker_settings.key)->required();
  worker->add_option("--name", worker_settings.name);
  worker->add_option("--target", worker_settings.target);
  worker->add_option("--temp-root", worker_settings.temp_root);
  worker->add_option("--cxx", worker_settings.cxx);
  worker->add_option("--memory-limit", worker_settings.memory_limit_bytes);

  CLI::App* serve = app.add_subcommand("serve", "run the artifact server");
  serve->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (!SplitOptions(raw_options, settings)) return 2;

  if (*key) return RunKey(files, settings, std::cout, std::cerr);
  if (*canon) return RunCanon(file_a, settings, std::cout, std::cerr);
  if (*why) return RunWhy(file_a, file_b, settings, std::cout, std::cerr);
  if (*stats) return RunStats(store_dir, std::cout, std::cerr);
  if (*verify) return RunVerify(store_dir, std::cout, std::cerr);
  if (*gc) return RunGc(store_dir, max_size, std::cout, std::cerr);
  if (*compile) return RunCompile(file_a, compile_settings, std::cout, std::cerr);
  if (*run) return RunRun(file_a, compile_settings, run_settings, std::cout, std::cerr);
  if (*worker) return RunCompileWorker(worker_settings, std::cerr);
  if (*serve) {
    std::cerr << "hlocache serve: the artifact server is not built yet\n";
    return 1;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hlocache: internal error: " << e.what() << "\n";
    return 1;
  }
}
