// Who takes part in a collective: the analysis that decides whether a program can run as one
// participant, where every collective has its one-participant meaning (an all-reduce of one
// value is that value, an all-gather of one shard is that shard, ...).
//
// A collective names its participants with replica_groups (explicit lists {{0,1},{2,3}}, the
// iota form [G,S]<=[N] with an optional transpose, or a mesh) or source_target_pairs; an empty
// or absent group means every participant, which the header's replica_count and
// num_partitions count (1 each when absent).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

// The ops that exchange data between participants or name one: all-reduce, all-gather,
// reduce-scatter, all-to-all, ragged-all-to-all, collective-permute, collective-broadcast,
// collective-reduce, their -start/-done forms, partition-id, replica-id, and send/recv (and
// their -done) that are not host transfers.
bool IsCollective(const Module& module, const Instruction& inst);

// replica_count * num_partitions of the module's header (1 for each one absent).
int64_t ProgramParticipants(const Module& module);

// Empty when `inst` (a collective) involves participant 0 alone in a program of one
// participant, so that it can run with its one-participant meaning; otherwise why not, e.g.
// "replica_groups={{0,1}} names 2 participants". Instructions that are not collectives give
// an empty string.
std::string WhyNotSingleParticipant(const Module& module, const Instruction& inst);

// Empty when every collective of the module's reachable computations can run as one
// participant; otherwise the first reason, prefixed with the instruction's name.
std::string WhyModuleNotSingleParticipant(const Module& module);

}  // namespace hlocache::hlo
