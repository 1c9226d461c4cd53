// Arguments for running a module without its real inputs (`hlocache run`, tests, benchmarks),
// and the comparison of an executable's results with the interpreter's.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/literal.h"

namespace hlocache::interp {

enum class ArgumentFill { kZeros, kRandom };

// One literal per entry parameter. kRandom is a seeded pseudo-random fill: floats uniform in
// [-1, 1), signed integers in [-8, 8], unsigned ones in [0, 16], pred 0 or 1. A parameter of a
// dynamic shape gets the sizes of interp::ArgumentShape. Errors: those of
// Literal::MakeZeros (unsupported types, dynamic shapes, too many elements).
Result<std::vector<Literal>> MakeArguments(const hlo::Module& module, ArgumentFill fill,
                                           uint64_t seed);

// Fills every array leaf of `literal` as kRandom does, from `rng`.
void FillRandom(Literal& literal, std::mt19937_64& rng);

// The array leaves of a literal, depth-first: the order of an executable's params[]/results[].
void FlattenLeaves(const Literal& literal, std::vector<const Literal*>& out);

struct Comparison {
  uint64_t elements = 0;
  uint64_t identical = 0;      // Bit-equal values (NaN equal to NaN; -0 and 0 differ).
  uint64_t mismatched = 0;     // Outside the module tolerance.
  double max_ulps = 0;         // The largest UlpDistance of a float element from the interpreter's.
  std::string first_mismatch;  // "result 1 element 7: executable 0.5, interpreter 0.25".
};

// Compares result buffers (dense row-major bytes per leaf) with the interpreter's leaves, for
// an executable of `module`, under the module tolerance of schema/numerics.tsv
// (compiler/semantics/numerics.h): integers and pred equal; each float element within the
// stated relative error of the interpreter's, or the stated absolute error; where `module` has
// inexact ops (HasInexactOps), also within the relative error of its leaf's largest magnitude
// (an error an op makes in a term of a sum is the sum's terms' scale, not the sum's); NaN only
// where NaN is expected. kInvalidArgument when the buffers do not fit the leaves.
Result<Comparison> CompareWithInterpreter(std::span<const Literal* const> expected,
                                          std::span<const std::string> buffers,
                                          const hlo::Module& module);

}  // namespace hlocache::interp
