// What the evaluation of one instruction may ask of the reference interpreter: the module it
// belongs to, diagnostics that name the instruction's line, its integer attributes, and the
// evaluation of called computations (reducers, comparators, loop bodies, branches).
//
// The core ops are evaluated inside interpreter.cc; the other op families (compiler/interp/
// eval_*.cc, dispatched by extended_ops.h) see the interpreter only through this interface, so
// that each family is one file that can be read, and tested, on its own.
//
// Ownership: the context borrows the module, which must outlive it.
// Thread safety: one evaluation at a time per context; the module is only read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"
#include "compiler/semantics/host_transfers.h"
#include "compiler/semantics/literal.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::interp {

class EvalContext : public ShapeContext {
 public:
  using ShapeContext::ShapeContext;

  // Evaluates computation `computation` of the module on `args` (one per parameter).
  virtual Result<Literal> Call(int32_t computation, std::span<const Literal> args) = 0;

  // As Call, but the callee may take the values of `args` rather than copy them (a loop's
  // state passed to its body): the caller must not read them afterwards.
  virtual Result<Literal> CallTaking(int32_t computation, std::span<Literal> args) = 0;

  // Operand `k` of `inst`, the instruction being evaluated, when nothing after `inst` reads it
  // (nor is it its computation's root, nor another operand of `inst`): the op may take its
  // value (move from it) and update it in place rather than copy it. nullptr otherwise.
  virtual Literal* Donated(const hlo::Instruction& inst, size_t k) = 0;

  // Computation `computation`, whose parameters and results are scalars (or tuples of
  // scalars), applied at every position of `args`: rank-1 arrays of one length, one per
  // parameter, of the parameters' types. Returns one such array per result (a tuple of arrays
  // when it returns a tuple), element i being what Call returns on the scalars at position i. A
  // computation of elementwise ops only (the usual reducer, comparator or combiner) is evaluated
  // once over whole arrays, far faster than a Call per position, with the same results.
  virtual Result<Literal> CallElementwise(int32_t computation, std::span<const Literal> args) = 0;

  // The 128-bit state (low word first) of a stateful random op (rng, rng-get-and-update-state),
  // zero when the evaluation starts, kept across the instruction's evaluations in it (a loop's
  // iterations), as a loaded executable keeps one per instruction across its runs.
  virtual uint64_t* RngState(const hlo::Instruction& inst) = 0;

  // The host infeed, outfeed and host send and recv talk to, or nullptr when the evaluation has
  // none.
  virtual HostTransfers* Host() = 0;
};

}  // namespace hlocache::interp
