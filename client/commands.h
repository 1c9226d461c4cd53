// The `hlocache` subcommands, as functions from parsed arguments to an exit status.
//
// Exit status: 0 success, 1 a failure the command explains on stderr, 2 bad usage (reported by
// main's flag parser before these run). Output goes to the given streams so tests can drive the
// commands in-process.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "client/keying.h"

namespace hlocache::client {

// `hlocache key FILE...`: prints "KEY  FILE" per file, like sha256sum.
int RunKey(const std::vector<std::string>& files, const KeySettings& settings, std::ostream& out,
           std::ostream& err);

// `hlocache canon FILE`: prints the canonical text.
int RunCanon(const std::string& file, const KeySettings& settings, std::ostream& out,
             std::ostream& err);

// `hlocache why A B`: 0 when the keys are equal; 1 when not, naming the differing parts and the
// first differing canonical lines with their source lines.
int RunWhy(const std::string& a, const std::string& b, const KeySettings& settings,
           std::ostream& out, std::ostream& err);

}  // namespace hlocache::client
