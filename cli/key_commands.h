// The flags of `key`, `canon` and `why`, defined once for both executables that answer them:
// `hlocache` (cli/front.cc), which runs them in its own lean process, and `hlocache-full`
// (cli/main.cc), which answers every command.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "keying/keying.h"

namespace CLI {
class App;
}

namespace hlocache::cli {

// What the three commands' flags parse into. The App they were added to owns the subcommands.
struct KeyCommands {
  keying::KeySettings settings;
  std::vector<std::string> raw_options;  // --option K=V, split by RunKeyCommand.
  std::vector<std::string> files;
  std::string file_a, file_b;
  CLI::App* key = nullptr;
  CLI::App* canon = nullptr;
  CLI::App* why = nullptr;
};

// The application's name and description, the same in both executables (their help and
// errors read alike).
inline constexpr const char* kAppDescription =
    "hlocache: a persistent compilation cache for HLO modules";

// Adds `key`, `canon` and `why` to `app`, parsing into `commands` (which must outlive `app`'s
// parse).
void AddKeyCommands(CLI::App& app, KeyCommands& commands);

// After a successful parse: runs the one of the three that was given and returns its exit
// status (2 for a malformed --option), or nullopt when none of them was.
std::optional<int> RunKeyCommand(KeyCommands& commands);

}  // namespace hlocache::cli
