// Canonical form of an HLO module: the text a cache key is computed from.
//
// Two modules get the same canonical text exactly when they are the same program, as far as the
// text can tell (the contract is schema/canonical-form.md):
// - Invariant under names and their .N suffixes, '%', whitespace, comments, metadata, stack-frame
//   tables, statistics, origin, sharding metadata, attribute order, printed operand shapes,
//   program-shape headers, default layouts, numeric spelling, channel id numbering, default
//   header values, unreachable computations, and the textual order of instructions and
//   computations wherever the dependency graph is the same (unless is_scheduled=true).
// - Everything else is kept: opcodes, shapes, types, non-default layouts, operand order,
//   attribute values, constants, parameter numbers, root choice, called bodies, sharding,
//   control predecessors, aliasing, entry layout, backend_config, frontend_attributes,
//   execution threads.
//
// How: instructions are ordered by a post-order walk of the dependency graph from the root, then
// from the remaining user-less instructions sorted by a structural hash; computations by a
// post-order walk of the call graph from the entry. Names are then positions (i0, i1, ...;
// c0, c1, ...). The canonical text is itself valid HLO text, and canonicalizing it again gives
// the same text.
//
// Thread safety: pure function of the module.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

struct CanonicalOptions {
  // Elided constants (`{...}`) hide values: two modules with different weights would share a key.
  // Canonicalize refuses them unless this is set.
  bool allow_elided_constants = false;
  // Fill CanonicalModule::source_lines (costs a pass over the source; only diagnostics need it).
  bool record_source_lines = false;
};

struct CanonicalModule {
  std::string text;
  // For each line of `text` (0-based index), the 1-based line of the source instruction it was
  // printed from; 0 for lines that come from no single instruction (header, braces). Empty unless
  // CanonicalOptions::record_source_lines.
  std::vector<uint32_t> source_lines;
};

Result<CanonicalModule> Canonicalize(const Module& module, const CanonicalOptions& options = {});

}  // namespace hlocache::hlo
