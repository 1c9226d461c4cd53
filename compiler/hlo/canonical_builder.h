// The canonical form (canonical.h) built in steps, for a module whose computations are still
// being parsed: the work Canonicalize does, taken one computation and one run of instructions
// at a time, so that it can follow a parser on another thread (canonical_pipeline.h).
//
// Contract: for a parsed module `m`, constructing a builder on `m`, then for each computation of
// m in order StartComputation, AddInstructions over its instructions in order (in runs of any
// length), FinishComputation with its root and execution thread, and at last Finish(m), gives
// exactly what Canonicalize(m) gives: the same text, and the same error.
//
// Ownership: the builder reads the module it was constructed on (its header attributes, tokens
// and source, which must be final by then) until Finish, and the instruction arrays passed to
// AddInstructions only during that call; Finish reads `module`, which may be that module
// moved. Thread safety: one thread at a time, any thread; but for PrintSharedFromBack, which
// may run beside Finish.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "compiler/hlo/canonical.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

namespace canonical_internal {
class Canonicalizer;
}

class CanonicalBuilder {
 public:
  CanonicalBuilder(const Module& module, const CanonicalOptions& options);
  ~CanonicalBuilder();
  CanonicalBuilder(const CanonicalBuilder&) = delete;
  CanonicalBuilder& operator=(const CanonicalBuilder&) = delete;

  // The next computation of the module, in textual order, begins.
  void StartComputation();
  // Instructions [begin, end) of that computation; `insts` is its instruction array, and
  // [0, begin) were added before. Operands and control predecessors refer to instructions
  // already added, callees to computations already finished (the parser's order ensures both).
  void AddInstructions(const Instruction* insts, uint32_t begin, uint32_t end);
  // Every instruction of it was added. `print_ahead`: its lines are printed now too, where the
  // text is streamed (CanonicalOptions::text_sink, without record_source_lines), rather than in
  // Finish: a builder that follows a parser does it while the parse goes on. Finish gives the
  // same either way; what is printed ahead is held until then.
  //
  // `share_print` (not with print_ahead; for one computation at most, the last): where the text
  // is streamed without source lines and the computation is large, its lines are to be printed
  // by two threads at once, Finish taking them from the front and PrintSharedFromBack from the
  // back. Returns whether they are; if so, PrintSharedFromBack must be called.
  bool FinishComputation(int32_t root, TokenRange execution_thread, bool print_ahead = false,
                         bool share_print = false);
  // The same, with the text of the execution thread's token (the module's, quotes and all;
  // empty for none): reads nothing of the module, which may then be moving on another thread.
  bool FinishComputation(int32_t root, std::string_view execution_thread, bool print_ahead,
                         bool share_print);
  // Where the text is streamed: orders the computations (callees before their callers, from
  // `entry`) and counts the text now, on this thread, rather than in Finish, when
  // `computations` is the number finished (else does nothing). PrintSharedFromBack then prints
  // the numbers of the callees and channels its lines name, where it would leave holes for
  // Finish to fill. Called after the last FinishComputation, before PrintSharedFromBack and
  // Finish; reads nothing of the module. Finish fails if the module's entry is another.
  void OrderComputationsAhead(int32_t entry, size_t computations);
  // Prints the shared lines (FinishComputation) from the back until it meets Finish, or all of
  // them when Finish has not started; does nothing when no lines are shared. Called once, after
  // the last FinishComputation. It may run while Finish runs on another thread (Finish waits for
  // it to end before it returns its text), and reads nothing of the module: the module may move,
  // or lose its instructions, once the last FinishComputation has returned.
  void PrintSharedFromBack();
  // Every computation was finished: orders them and prints the module.
  Result<CanonicalModule> Finish(const Module& module);

 private:
  std::unique_ptr<canonical_internal::Canonicalizer> impl_;
};

}  // namespace hlocache::hlo
