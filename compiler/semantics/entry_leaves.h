// How an executable's entry takes its arguments and gives its results: one buffer per array
// leaf of the entry computation's parameters, then of its result, in order (tuples flattened).
// The CPU generator writes hlocache_entry to it and the runtime that runs an artifact
// (compiler/artifact/execute.h) reads it, so it lives below both.
//
// Thread safety: pure function.
#pragma once

#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

// The array leaves of the entry computation's parameters and result, in the order of
// hlocache_entry's params[] and results[]. kInvalidArgument without an entry computation.
struct EntryLeaves {
  std::vector<hlo::Shape> parameters;
  std::vector<hlo::Shape> results;
};
Result<EntryLeaves> EntryLeavesOf(const hlo::Module& module);

}  // namespace hlocache::compiler
