// Lexer for the HLO text format (see schema/canonical-form.md and the HLO grammar reference).
//
// Lex() turns a whole source text into a token vector ending with one kEnd token. Comments
// (`// ...` to end of line, `/* ... */`) and whitespace are skipped. Input that cannot be
// tokenized (binary junk, an unterminated string or comment) is an error naming file:line:col.
//
// Thread safety: pure function (a large source is lexed with a thread of its own, joined before
// it returns).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/token.h"

namespace hlocache::hlo {

// Source positions are computed on demand (only error paths and diagnostics need them).
struct SourcePosition {
  uint32_t line = 0;    // 1-based.
  uint32_t column = 0;  // 1-based, in bytes.
};
SourcePosition PositionOf(std::string_view source, uint32_t offset);

// "FILE:LINE:COL: error: MESSAGE", the one format every HLO error uses.
Status ErrorAt(std::string_view filename, std::string_view source, uint32_t offset,
               std::string_view message);

// Largest source accepted: offsets are 32-bit.
inline constexpr size_t kMaxSourceBytes = (size_t{1} << 31) - 1;

// A `{` at bracket depth 0 (a computation's body, or a module attribute's value) and the number
// of `name =` pairs directly inside it (at depth 1, not after a comma: the instructions of a
// body). Counted as the tokens are made, so that the parser can size a computation's
// instructions without a pass over its tokens. Any bracket counts for the depth.
struct TopLevelGroup {
  uint32_t open = 0;         // Token index of the `{`.
  uint32_t definitions = 0;  // `name =` pairs directly inside.
};

// A source this large is lexed in two halves at once, on two threads (where the host has two
// CPUs): the same tokens, groups and errors as one thread, in about half the time. Below it, a
// thread costs more than it saves.
inline constexpr size_t kTwoThreadLexBytes = size_t{1} << 20;

// `groups`, when given, receives the top-level groups in token order. `two_thread_bytes`: the
// smallest source lexed on two threads (tests pass 0).
Result<std::vector<Token>> Lex(std::string_view source, std::string_view filename,
                               std::vector<TopLevelGroup>* groups = nullptr,
                               size_t two_thread_bytes = kTwoThreadLexBytes);

// The part of `source` before the first line that starts with "// -----", the separator XLA's
// tools use between modules in one file; the whole source when there is none.
std::string_view FirstModuleText(std::string_view source);

// Lex(FirstModuleText(source), ...), the same tokens, groups and errors. The lexer stops at the
// separator as it reaches it, where looking through the source for it first was a pass over
// the text before lexing could start (a third of a millisecond for each 2 MB).
Result<std::vector<Token>> LexFirstModule(std::string_view source, std::string_view filename,
                                          std::vector<TopLevelGroup>* groups = nullptr,
                                          size_t two_thread_bytes = kTwoThreadLexBytes);

// For tests: Lex on one thread with every token lexed the general way. Lex takes the tokens
// most of a module is made of (punctuation, names, decimal integers) in a loop of their own,
// which must give the same tokens, groups and errors as this.
Result<std::vector<Token>> LexEachTokenAlone(std::string_view source, std::string_view filename,
                                             std::vector<TopLevelGroup>* groups = nullptr);

}  // namespace hlocache::hlo
