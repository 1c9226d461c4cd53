// Stores an artifact only once it has been checked: the container parses, its checksum
// matches its payload, and its header names the key it is stored under (and, for a file
// artifact, its namespace and path compose to that key). Used for uploads
// (PUT /v1/artifacts/{key}) and for what a server fetches from its upstream.
//
// Bytes are fed as they arrive. Artifacts up to kBufferedBytes are held in memory and stored
// with one write; larger ones go into a store writer chunk by chunk once their header has been
// read, so a multi-GiB artifact never sits whole in memory. Nothing is visible in the store
// until Finish succeeds, and a VerifiedPut destroyed before that leaves nothing behind.
//
// Thread safety: one thread at a time; the store is shared (it is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "common/status.h"
#include "compiler/artifact/stream_check.h"

namespace hlocache::server {

class VerifiedPut {
 public:
  static constexpr uint64_t kBufferedBytes = uint64_t{4} << 20;

  // `length` is the size the sender announced; `strict` also checks the header's target,
  // compiler id and payload kind, and computes the key again from the graph the artifact
  // carries (serve --verify-uploads).
  VerifiedPut(cache::Store& store, std::string key, uint64_t length, bool strict);

  // Takes the next bytes. Returns false once the artifact has failed a check (later calls are
  // ignored and return false), so a caller may read the rest of a body and drop it.
  bool Receive(std::string_view bytes);

  // After the last byte: commits the artifact. Errors: kInvalidArgument for an artifact that
  // fails a check, with the reason; the store's errors (kResourceExhausted for a full disk).
  Result<cache::PutOutcome> Finish();

  uint64_t bytes_received() const { return checker_.bytes_seen(); }
  // What the header said, once it has been checked (for a file artifact: target "file", the
  // namespace as compiler id, the path as graph name).
  const cache::ArtifactInfo& info() const { return info_; }

 private:
  bool Fail(Status status);
  bool CheckHeader();
  bool CheckFileHeader(const compiler::ArtifactHeader& header);
  static Result<std::string> KeyOfGraph(const compiler::ArtifactHeader& header);

  cache::Store& store_;
  const std::string key_;
  const uint64_t length_;
  const bool strict_;
  compiler::ArtifactStreamChecker checker_;
  cache::ArtifactInfo info_;
  std::string buffer_;
  std::unique_ptr<cache::ArtifactWriter> writer_;  // Discards what it wrote unless committed.
  bool header_checked_ = false;
  Status failure_;
};

}  // namespace hlocache::server
