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
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

// Takes the canonical text as it is printed, for a caller that wants only what is computed from
// it (a key) and not the text held whole (megabytes for a large module). Called on the thread
// that canonicalizes, once the module is known to canonicalize: Begin once, with the text's
// exact length, then Append with the text in order, in pieces of a few tens of kilobytes (one
// line may make a larger one), every byte once. Should Canonicalize return an error after all
// (an internal one: the text printed was not as long as counted), the caller discards what the
// sink took.
class CanonicalTextSink {
 public:
  virtual ~CanonicalTextSink() = default;
  virtual void Begin(uint64_t text_bytes) = 0;
  virtual void Append(std::string_view piece) = 0;
};

struct CanonicalOptions {
  // Elided constants (`{...}`) hide values: two modules with different weights would share a key.
  // Canonicalize refuses them unless this is set.
  bool allow_elided_constants = false;
  // Fill CanonicalModule::source_lines (costs a pass over the source; only diagnostics need it).
  bool record_source_lines = false;
  // When set, the text goes to the sink as it is printed and CanonicalModule::text is left
  // empty. Not owned; must outlive the call (for a CanonicalBuilder, until Finish).
  CanonicalTextSink* text_sink = nullptr;
  // Where the text is streamed without source lines and a builder follows the parser on a
  // thread of its own (canonical_pipeline.h), the lines of the computation it finishes last (the
  // entry, in XLA's dumps) are printed by both threads at once when there are at least this
  // many, each thread taking runs of `shared_run_lines` (at least 1) at a time. Below a few
  // thousand lines a second thread saves less than handing the text over costs; tests lower
  // both, to share the lines of small modules too.
  size_t shared_print_lines = 4096;
  size_t shared_run_lines = 512;
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
