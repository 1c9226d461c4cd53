// ArtifactStreamChecker: the container checks of DecodeArtifact, made on bytes as they arrive,
// so that an upload of any size can be verified without holding it in memory.
//
// Feed the bytes in order, then call Finish. A prefix that cannot start an artifact (wrong
// magic, unknown version, impossible lengths) and bytes past the size the lengths declare fail
// at once, in Feed; the checksum and the header's fields are checked in Finish. The same codes
// as DecodeArtifact: kInvalidArgument for bytes that are not an artifact, kFailedPrecondition for
// a newer format version, kDataLoss for a corrupt or truncated one.
//
// Memory: the header (at most 1 MiB) and 16 bytes of trailer. Thread safety: none; one stream,
// one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "compiler/artifact/container.h"

namespace hlocache::compiler {

class ArtifactStreamChecker {
 public:
  ArtifactStreamChecker();
  ~ArtifactStreamChecker();
  ArtifactStreamChecker(const ArtifactStreamChecker&) = delete;
  ArtifactStreamChecker& operator=(const ArtifactStreamChecker&) = delete;

  // After the first error, every later call returns that error.
  Status Feed(std::string_view bytes);
  // The header, when everything fed is exactly one intact artifact.
  Result<ArtifactHeader> Finish();

  uint64_t bytes_seen() const { return seen_; }
  // The size the lengths declare, once the fixed part and the header have arrived; else 0.
  uint64_t declared_size() const { return declared_size_; }

 private:
  Status ParsePrefix();

  std::string prefix_;  // Magic, version, header length, header, payload length.
  uint64_t prefix_needed_ = 16;
  uint64_t declared_size_ = 0;
  uint64_t seen_ = 0;
  char trailer_[16] = {};
  void* hash_state_;  // XXH3_state_t, kept out of this header.
  Status failed_;
};

}  // namespace hlocache::compiler
