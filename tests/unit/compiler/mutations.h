// Text-level mutations of parsed HLO modules, generated from real modules to test the cache key's
// invariances (the key must not change) and sensitivities (it must change).
//
// Every generator reads a parsed module (its tokens and structure) and returns the module's source
// text with the mutation applied, or nullopt when the module has no site for it. Edits are made on
// the source text, so everything the mutation does not touch (spacing, comments, spellings) stays
// exactly as written. Sensitivity mutations edit one site in a computation reachable from the
// entry: an unreachable computation is allowed not to matter.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "compiler/hlo/module.h"

namespace hlocache::mutation {

using Mutated = std::optional<std::string>;

// ---- Invariances ----

// Every module, computation and instruction name becomes a fresh one (`n<k>`, numbered in a
// shuffled order so that the new names sort differently from the old ones), at its definition
// and at every reference. With `toggle_percent`, each name also gains or loses its '%'.
Mutated RenameEverything(const hlo::Module& m, bool toggle_percent);
// Removes every `, metadata={...}`.
Mutated StripMetadata(const hlo::Module& m);
// Adds metadata to every instruction that has none.
Mutated AddMetadata(const hlo::Module& m);
// Replaces the spacing between tokens (where there was some, and after every comma) with a mix
// of spaces, tabs, new lines and indentation, block comments and line comments.
Mutated ReformatWhitespaceAndComments(const hlo::Module& m);
// Removes every written layout that is the default one ({rank-1,...,0}): either in instruction
// results, operands, program shapes and the header, or only in shapes inside instruction
// attribute values (operand_layout_constraints={f32[2,2]{1,0}}, outfeed_shape=...).
enum class LayoutPlace { kOutsideAttributeValues, kInAttributeValues };
Mutated DropDefaultLayouts(const hlo::Module& m, LayoutPlace place);
// Writes the default layout after every array shape of rank >= 1 that has none.
Mutated AddDefaultLayouts(const hlo::Module& m);
// Respells the numbers of f32 and f64 constants with the same decimal value (1 -> 1.0,
// 0.5 -> 5e-1, 2.5e-3 -> 250e-5).
Mutated RespellFloatConstants(const hlo::Module& m);
// In every computation, writes the parameter instructions first, in descending parameter
// number. Not for scheduled modules.
Mutated MoveParametersFirst(const hlo::Module& m);
// Swaps adjacent instruction lines where neither uses the other and the root stays the root.
// Not for scheduled modules.
Mutated SwapIndependentNeighbours(const hlo::Module& m);
// Writes the computations in another legal order (callees still before callers), as far from
// the original as the call graph allows. Not for scheduled modules.
Mutated ReorderComputations(const hlo::Module& m);
// Reverses the order of the attributes of every instruction that has two or more.
Mutated ReverseAttributeOrder(const hlo::Module& m);

// ---- Sensitivities ----

// The first number of a constant literal changes value.
Mutated ChangeConstantValue(const hlo::Module& m);
// One instruction's result shape changes (an entry parameter if any): its first dimension grows
// by one, or a scalar becomes a one-element vector.
Mutated ChangeDimension(const hlo::Module& m);
// direction=LT <-> GT, LE <-> GE, EQ <-> NE on one compare.
Mutated FlipComparisonDirection(const hlo::Module& m);
// The two operands of a two-operand instruction (non-commutative opcodes preferred) swap, unless
// they compute the same value (same opcode, shape and operands).
Mutated SwapOperands(const hlo::Module& m);
// The first number of an integer-valued attribute (dimensions=, else index=, iota_dimension=,
// contracting dims, slice=, ...) grows by one.
Mutated ChangeAttributeValue(const hlo::Module& m);
// One sharding changes: {replicated} -> {maximal device=0}, {maximal device=N} -> N+1,
// anything else -> {replicated}.
Mutated ChangeSharding(const hlo::Module& m);
// One opcode changes to one taking the same operands: add <-> multiply, maximum <-> minimum,
// exponential <-> log, reshape <-> bitcast, ...
Mutated ChangeOpcode(const hlo::Module& m);

}  // namespace hlocache::mutation
