// `hlocache`: the command users run. It answers `key`, `canon` and `why` in this process and
// hands every other command line to `hlocache-full` unchanged, by exec: the same process, so
// its pid, signals and exit status are the full command's.
//
// Why two executables: a process pays for the shared libraries it links before `main` runs, and
// the full command links the network, storage and FUSE libraries (cpp-httplib alone brings
// OpenSSL, whose initialization runs as it loads). `hlocache --version` took 6.8 ms where an
// empty program takes 0.9. Keying needs none of them, and `key` is what CI jobs and build scripts
// run once a module, each time in a fresh process. This executable links the keying code, the
// C++ library and libxxhash, nothing else.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string_view>

#include "cli/key_commands.h"
#include "common/file.h"

#ifndef HLOCACHE_FULL_FROM_BINDIR
#error "HLOCACHE_FULL_FROM_BINDIR names hlocache-full's installed path relative to hlocache's"
#endif

namespace {

bool IsKeyCommand(std::string_view arg) { return arg == "key" || arg == "canon" || arg == "why"; }

// Beside this executable (the build tree), else where `cmake --install` puts it.
std::filesystem::path FullCommand() {
  const std::filesystem::path dir = hlocache::CurrentExecutable().parent_path();
  if (dir.empty()) return "hlocache-full";  // No /proc: looked up on PATH (execvp).
  std::filesystem::path beside = dir / "hlocache-full";
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  return (dir / HLOCACHE_FULL_FROM_BINDIR).lexically_normal();
}

// Parses and runs a key command here. nullopt: the line is not one this executable answers
// alone (help, a flag only the full command knows such as --s3-endpoint, or bad usage, which the
// full command reports as it always has). Nothing has been written when it returns nullopt.
std::optional<int> RunHere(int argc, char** argv) {
  CLI::App app{hlocache::cli::kAppDescription};
  app.require_subcommand(1);
  hlocache::cli::KeyCommands commands;
  hlocache::cli::AddKeyCommands(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError&) {
    return std::nullopt;
  }
  return hlocache::cli::RunKeyCommand(commands);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && IsKeyCommand(argv[1])) {
    try {
      if (std::optional<int> status = RunHere(argc, argv)) return *status;
    } catch (const std::exception& e) {
      std::cerr << "hlocache: internal error: " << e.what() << "\n";
      return 1;
    }
  }
  const std::filesystem::path full = FullCommand();
  ::execvp(full.c_str(), argv);  // A path with a slash is run as it is, without PATH.
  std::cerr << "hlocache: cannot run " << full.string()
            << " (which answers every command but key, canon and why): " << std::strerror(errno)
            << "\n";
  return 1;
}
