#include "compiler/semantics/host_transfers.h"

#include <random>

#include "compiler/semantics/arguments.h"

namespace hlocache::interp {
namespace {

std::vector<Literal> LeavesOf(const Literal& value) {
  std::vector<const Literal*> leaves;
  FlattenLeaves(value, leaves);
  std::vector<Literal> out;
  for (const Literal* l : leaves) out.push_back(*l);
  return out;
}

std::string Describe(const RecordingHost::Transfer& t) {
  return std::string(t.kind == HostTransferKind::kFeed ? "outfeed" : "send on channel ") +
         (t.kind == HostTransferKind::kFeed ? "" : std::to_string(t.channel));
}

}  // namespace

Result<Literal> RecordingHost::Receive(HostTransferKind kind, int64_t channel,
                                       const hlo::Shape& shape) {
  HLOCACHE_ASSIGN_OR_RETURN(Literal value, Literal::MakeZeros(shape));
  const uint64_t before = received_on_[{static_cast<int>(kind), channel}]++;
  std::seed_seq seq{seed_, static_cast<uint64_t>(kind), static_cast<uint64_t>(channel), before};
  std::mt19937_64 rng(seq);
  FillRandom(value, rng);
  received_.push_back({kind, channel, LeavesOf(value)});
  return value;
}

Status RecordingHost::Send(HostTransferKind kind, int64_t channel, const Literal& value) {
  sent_.push_back({kind, channel, LeavesOf(value)});
  return Status::Ok();
}

std::string CompareSent(const RecordingHost& expected, const RecordingHost& got) {
  const auto& want = expected.sent();
  const auto& have = got.sent();
  for (size_t i = 0; i < want.size() && i < have.size(); ++i) {
    const std::string at = "transfer " + std::to_string(i) + " (" + Describe(want[i]) + ")";
    if (want[i].kind != have[i].kind || want[i].channel != have[i].channel) {
      return at + ": the executable's was " + Describe(have[i]);
    }
    if (want[i].leaves.size() != have[i].leaves.size())
      return at + ": a different number of arrays";
    for (size_t k = 0; k < want[i].leaves.size(); ++k) {
      if (!(want[i].leaves[k] == have[i].leaves[k])) {
        return at + " array " + std::to_string(k) + ": executable " + have[i].leaves[k].ToString() +
               ", interpreter " + want[i].leaves[k].ToString();
      }
    }
  }
  if (want.size() != have.size()) {
    return "the interpreter sent " + std::to_string(want.size()) + " values, the executable " +
           std::to_string(have.size());
  }
  return "";
}

}  // namespace hlocache::interp
