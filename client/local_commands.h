// The `hlocache` subcommands that need nothing but the file they are given: keying, the
// canonical text and the explanation of a key difference. Declared apart from the others
// (client/commands.h) because the `hlocache` executable runs these three in its own process,
// linked against the keying code alone (cli/front.cc), and hands every other command to
// `hlocache-full`.
//
// Exit status: 0 success, 1 a failure the command explains on `err`. Output goes to the given
// streams so tests can drive the commands in-process.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "keying/keying.h"

namespace hlocache::client {

// Each of the three is meant for a process of its own: it first prepares the C library's heap
// for what it parses (PrepareHeapToParse), which holds for the rest of the process.

// Grows the heap at once, in huge pages, by what parsing and canonicalizing the `at_once`
// largest of `files` takes (common/huge_pages.h). Files that cannot be sized count as empty.
void PrepareHeapToParse(const std::vector<std::string>& files, size_t at_once);

// `hlocache key FILE...`: prints "KEY  FILE" per file, like sha256sum.
int RunKey(const std::vector<std::string>& files, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err);

// `hlocache canon FILE`: prints the canonical text.
int RunCanon(const std::string& file, const keying::KeySettings& settings, std::ostream& out,
             std::ostream& err);

// `hlocache why A B`: 0 when the keys are equal; 1 when not, naming the differing parts and the
// first differing canonical lines with their source lines.
int RunWhy(const std::string& a, const std::string& b, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err);

}  // namespace hlocache::client
