// Test helpers for the code generator and the interpreter: literals from values, and the check
// every op test ends with: compile a module, run it, and compare with the interpreter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/artifact/loader.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/shape.h"
#include "compiler/semantics/literal.h"

namespace hlocache::compiler {

// An array literal of `type` and `dims` holding `values` (row-major; integers truncated).
interp::Literal Array(hlo::PrimitiveType type, std::vector<int64_t> dims,
                      const std::vector<double>& values);
inline interp::Literal F32(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Array(hlo::PrimitiveType::kF32, std::move(dims), values);
}
inline interp::Literal S32(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Array(hlo::PrimitiveType::kS32, std::move(dims), values);
}
inline interp::Literal Pred(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Array(hlo::PrimitiveType::kPred, std::move(dims), values);
}
// A token: no data, one element that is always 0.
inline interp::Literal Token() { return Array(hlo::PrimitiveType::kToken, {}, {0}); }

// Builds `module` for this host's CPU target (with a placeholder key) and loads it; nullptr, with
// a gtest failure, when a step fails.
std::unique_ptr<LoadedExecutable> BuildAndLoad(const hlo::Module& module);

// Evaluates `text` with the interpreter on `args`, lowers it (twice, checking the source is
// deterministic), compiles it with the system C++ compiler, loads the artifact, runs it on the
// same arguments and checks each result against the interpreter's: bit for bit (integers and
// pred byte for byte) where every op of the module is exact, within the module tolerance of
// schema/numerics.tsv where one is not (an f32 exp, tanh, ...). A program that transfers with the
// host runs, in both, with a seeded interp::RecordingHost, and must send the same values. Failures
// are reported with gtest's EXPECT_*. Returns the generated source (empty when a step failed).
std::string ExpectCompiledMatchesInterpreter(const std::string& text,
                                             const std::vector<interp::Literal>& args);

// The same on the seeded random arguments of interp::MakeArguments.
std::string ExpectCompiledMatchesInterpreterOnRandomInputs(const std::string& text,
                                                           uint64_t seed = 1);

}  // namespace hlocache::compiler
