// The host an executable talks to while it runs: the values infeed and recv (with
// is_host_transfer=true) take from it, and those outfeed and send give it.
//
// XLA runs these through a device's transfer manager: infeed and outfeed queues, and host
// callbacks per channel. Here one interface serves the reference interpreter and compiled
// executables alike (compiler/artifact/execute.h adapts it to the generated code's C calls), so
// a test can hand both the same values and compare what each sent.
//
// Thread safety: a host is used by one evaluation or run at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/shape.h"
#include "compiler/semantics/literal.h"

namespace hlocache::interp {

// infeed and outfeed use the device's queues (no channel); recv and send name a channel.
enum class HostTransferKind : int { kFeed = 0, kChannel = 1 };

class HostTransfers {
 public:
  virtual ~HostTransfers() = default;
  // The next value the host has for (kind, channel), of `shape` (an array, or a tuple of the
  // leaves of a tuple-shaped transfer: only the leaves and their order are the contract).
  // An error fails the run with it.
  virtual Result<Literal> Receive(HostTransferKind kind, int64_t channel,
                                  const hlo::Shape& shape) = 0;
  // Takes a value the program gives the host on (kind, channel).
  virtual Status Send(HostTransferKind kind, int64_t channel, const Literal& value) = 0;
};

// A host for tests and `hlocache run`: each value received is seeded pseudo-random (as
// interp::MakeArguments makes arguments), decided by the seed, the kind, the channel and how
// many values came before it on that channel, leaf by leaf; each value sent is recorded, in
// order, as its leaves. Two runs of one program, interpreted and compiled, given hosts of one
// seed receive the same values and must send the same ones.
class RecordingHost : public HostTransfers {
 public:
  struct Transfer {
    HostTransferKind kind;
    int64_t channel;
    std::vector<Literal> leaves;
  };
  explicit RecordingHost(uint64_t seed) : seed_(seed) {}

  Result<Literal> Receive(HostTransferKind kind, int64_t channel, const hlo::Shape& shape) override;
  Status Send(HostTransferKind kind, int64_t channel, const Literal& value) override;

  const std::vector<Transfer>& received() const { return received_; }
  const std::vector<Transfer>& sent() const { return sent_; }

 private:
  uint64_t seed_;
  std::vector<Transfer> received_, sent_;
  std::map<std::pair<int, int64_t>, uint64_t> received_on_;  // Values so far per kind, channel.
};

// "" when the two hosts sent the same values (leaves equal, NaN equal to NaN) on the same
// kinds and channels in the same order; else what differs first.
std::string CompareSent(const RecordingHost& expected, const RecordingHost& got);

}  // namespace hlocache::interp
