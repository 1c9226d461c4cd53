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
#include "compiler/hlo/lexer.h"  // FirstModuleText
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

// Parses `text`; `filename` only names the source in error messages. Instructions written
// without a shape get the one their operands imply where they imply one (shape_inference.h).
Result<Module> ParseModule(std::string text, std::string filename);

// Sees a module while it is parsed, so that work on its instructions can start before the
// parser ends (keying does: canonical_pipeline.h). Called on the parser's thread, in this
// order: HeaderParsed once, when the header, the module attributes and every token are final
// (not called when the text does not lex or its header is malformed); then, for each
// computation, InstructionAdded after each instruction is appended to `comp.instructions`,
// InstructionsWillMove before an append that moves them all to a larger array (a reader must
// be done with the old one by the time it returns), and ComputationLeft when the parser leaves
// the computation, `parsed` when it is whole (and about to move into the module; its
// instruction array stays where it is), false when an error ended it (its array is freed once
// this returns); then ParseEnded once, always, before InferMissingShapes and before the
// module moves, `parsed` when the parse succeeded (the module is then returned: its source and
// tokens live on with it, wherever it moves). Every reference passed is valid only during the
// call.
class ParseListener {
 public:
  virtual ~ParseListener() = default;
  virtual void HeaderParsed(const Module& module) = 0;
  virtual void InstructionAdded(const Computation& comp) = 0;
  virtual void InstructionsWillMove(const Computation& comp) = 0;
  virtual void ComputationLeft(const Computation& comp, bool parsed) = 0;
  virtual void ParseEnded(bool parsed) = 0;
};

// ParseModule, telling `listener` (not owned; may be null) what it parses as it goes.
Result<Module> ParseModule(std::string text, std::string filename, ParseListener* listener);

// Reads and parses a file ("-" reads standard input).
Result<Module> ParseModuleFile(const std::string& path);

// The text ParseModuleFile parses ("-": standard input; at most 2 GiB), and the name its errors
// give the source ("<stdin>" for "-").
Result<std::string> ReadModuleFile(const std::string& path);
std::string ModuleFileName(const std::string& path);

}  // namespace hlocache::hlo
