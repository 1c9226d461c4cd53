// Names of the attributes HLO text may carry, and what kind of value each takes.
//
// The lists follow XLA's HLO parser: an attribute outside them is an error, as it is in XLA.
// Thread safety: pure functions over constant tables.
#pragma once

#include <span>
#include <string_view>

namespace hlocache::hlo {

// True for attribute names that any instruction may carry, or that some opcode accepts.
bool IsKnownInstructionAttribute(std::string_view name);
// The same names as a list, and a name's position in it (-1 for one outside it).
std::span<const std::string_view> InstructionAttributeNames();
int InstructionAttributeIndex(std::string_view name);
bool IsKnownModuleAttribute(std::string_view name);
// Attributes whose value names called computations (to_apply, calls, body, ...).
bool IsCalleeAttribute(std::string_view name);

// Debug-only attributes: they never change what a program computes, so the canonical form drops
// them (metadata, statistics, origin).
bool IsDebugOnlyAttribute(std::string_view name);

}  // namespace hlocache::hlo
