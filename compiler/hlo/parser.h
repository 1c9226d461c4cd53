// Parser for the HLO text format: source text in, hlo::Module out.
//
// Accepts the whole grammar XLA prints and parses: modules with or without the `HloModule`
// header, header attributes, stack-frame tables, computations with or without program shapes,
// instructions with or without `%`, printed operand shapes, nested anonymous operands, async
// sugar, every opcode and every attribute XLA's parser knows. As in XLA, operands and control
// predecessors must be defined before use within a computation, and called computations before
// their callers, so every parsed module is acyclic. A file holding several modules separated
// by `// -----` lines (XLA's test-file convention) parses as its first module.
//
// Every malformed input is an InvalidArgument Status whose message is one line:
// "FILE:LINE:COL: error: MESSAGE". The parser never crashes on any input, recursion is bounded,
// and work is linear in the input size.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

// Parses `text`; `filename` only names the source in error messages. Instructions written
// without a shape get the one their operands imply where they imply one (shape_inference.h).
Result<Module> ParseModule(std::string text, std::string filename);

// The part of `source` before the first line that starts with "// -----", the separator XLA's
// tools use between modules in one file; the whole source when there is none.
std::string_view FirstModuleText(std::string_view source);

// Reads and parses a file ("-" reads standard input).
Result<Module> ParseModuleFile(const std::string& path);

}  // namespace hlocache::hlo
