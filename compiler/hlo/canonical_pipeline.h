// Parsing and canonicalizing a module at once, on two threads: the parser on the calling
// thread, and the canonical form (canonical_builder.h) built on a second one, a few hundred
// instructions behind the parser, so that what is left after the parser ends is ordering and
// printing. Where the text is streamed (CanonicalOptions::text_sink), the second thread also
// orders the computations and prints the last one's lines from the back while the calling
// thread prints them from the front (CanonicalOptions::shared_print_lines). Keying a large
// module is the one place both run back to back on text that just arrived, with nothing to do
// in between.
//
// Contract: the same module, canonical text and error as ParseModule then Canonicalize (a parse
// error when the text does not parse; else Canonicalize's result), whatever the threads do.
//
// Thread safety: pure functions; each starts and joins threads of its own per call on large
// texts.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

struct ParsedCanonical {
  Module module;
  CanonicalModule canonical;
};

// Texts smaller than this are parsed and canonicalized on the calling thread alone: starting a
// thread and handing instructions over costs more than it saves below a few hundred
// instructions.
inline constexpr size_t kDefaultTwoThreadBytes = size_t{256} << 10;

// `two_thread_bytes`: the smallest text given a second thread (tests pass 0); one thread also
// on a host with one CPU.
Result<ParsedCanonical> ParseAndCanonicalize(std::string text, std::string filename,
                                             const CanonicalOptions& options,
                                             size_t two_thread_bytes = kDefaultTwoThreadBytes);

// ParseAndCanonicalize for a caller that keeps only the canonical form (a key): the same
// canonical form and error, and the module is gone when it returns. On two threads, the
// module's instructions are freed while the second thread orders the last computation, and
// while it prints that computation's lines with the first (or, if it prints none, on a helper
// while the first prints).
Result<CanonicalModule> CanonicalizeText(std::string text, std::string filename,
                                         const CanonicalOptions& options,
                                         size_t two_thread_bytes = kDefaultTwoThreadBytes);

}  // namespace hlocache::hlo
