#include "compiler/artifact/stream_check.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace hlocache::compiler {
namespace {

// Far beyond any artifact; keeps 40 + H + P from overflowing.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 50;

uint64_t LittleEndian(std::string_view in, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(in[offset + i]);
  return v;
}

uint64_t BigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

XXH3_state_t* State(void* p) { return static_cast<XXH3_state_t*>(p); }

}  // namespace

ArtifactStreamChecker::ArtifactStreamChecker() : hash_state_(XXH3_createState()) {
  XXH3_128bits_reset(State(hash_state_));
}

ArtifactStreamChecker::~ArtifactStreamChecker() { XXH3_freeState(State(hash_state_)); }

Status ArtifactStreamChecker::ParsePrefix() {
  if (prefix_.size() == 16) {
    if (std::string_view(prefix_).substr(0, 8) != kArtifactMagic) {
      return InvalidArgument("not an hlocache artifact (no container magic)");
    }
    const uint64_t version = LittleEndian(prefix_, 8, 4);
    if (version != kArtifactFormatVersion) {
      return FailedPrecondition("artifact format version " + std::to_string(version) +
                                " is not this hlocache's (" +
                                std::to_string(kArtifactFormatVersion) + ")");
    }
    const uint64_t header_bytes = LittleEndian(prefix_, 12, 4);
    if (header_bytes > kMaxArtifactHeaderBytes) {
      return DataLoss("corrupt artifact: header length " + std::to_string(header_bytes) +
                      " is over the 1 MiB limit");
    }
    prefix_needed_ = 16 + header_bytes + 8;
    return Status::Ok();
  }
  const uint64_t header_bytes = prefix_needed_ - 24;
  const uint64_t payload_bytes = LittleEndian(prefix_, 16 + header_bytes, 8);
  if (payload_bytes > kMaxPayloadBytes) {
    return DataLoss("corrupt artifact: payload length " + std::to_string(payload_bytes));
  }
  declared_size_ = kArtifactFixedBytes + header_bytes + payload_bytes;
  return Status::Ok();
}

Status ArtifactStreamChecker::Feed(std::string_view bytes) {
  if (!failed_.ok()) return failed_;
  while (!bytes.empty()) {
    if (declared_size_ == 0) {
      // The prefix is always hashed: it lies before the trailer whatever the lengths say.
      const size_t take = std::min<uint64_t>(bytes.size(), prefix_needed_ - prefix_.size());
      prefix_.append(bytes.data(), take);
      XXH3_128bits_update(State(hash_state_), bytes.data(), take);
      seen_ += take;
      bytes.remove_prefix(take);
      if (prefix_.size() == prefix_needed_) {
        failed_ = ParsePrefix();
        if (!failed_.ok()) return failed_;
      }
      continue;
    }
    const uint64_t body_end = declared_size_ - 16;
    if (seen_ < body_end) {
      const size_t take = std::min<uint64_t>(bytes.size(), body_end - seen_);
      XXH3_128bits_update(State(hash_state_), bytes.data(), take);
      seen_ += take;
      bytes.remove_prefix(take);
    } else if (seen_ < declared_size_) {
      const size_t take = std::min<uint64_t>(bytes.size(), declared_size_ - seen_);
      std::memcpy(trailer_ + (seen_ - body_end), bytes.data(), take);
      seen_ += take;
      bytes.remove_prefix(take);
    } else {
      failed_ = DataLoss("corrupt artifact: bytes past the " + std::to_string(declared_size_) +
                         " its lengths declare");
      return failed_;
    }
  }
  return Status::Ok();
}

Result<ArtifactHeader> ArtifactStreamChecker::Finish() {
  if (!failed_.ok()) return Error(failed_);
  if (declared_size_ == 0 || seen_ != declared_size_) {
    // Under the fixed part's 40 bytes, nothing is an artifact, whatever it starts with: the
    // spec's first check, and what DecodeArtifact says of the same bytes.
    failed_ =
        seen_ < kArtifactFixedBytes
            ? InvalidArgument("not an hlocache artifact (" + std::to_string(seen_) + " bytes)")
            : DataLoss("corrupt artifact: truncated at " + std::to_string(seen_) + " bytes" +
                       (declared_size_ ? " of " + std::to_string(declared_size_) : ""));
    return Error(failed_);
  }
  const XXH128_hash_t sum = XXH3_128bits_digest(State(hash_state_));
  if (sum.high64 != BigEndian64(trailer_) || sum.low64 != BigEndian64(trailer_ + 8)) {
    failed_ = DataLoss("corrupt artifact: checksum mismatch");
    return Error(failed_);
  }
  const uint64_t header_bytes = prefix_needed_ - 24;
  return ParseArtifactHeader(std::string_view(prefix_).substr(16, header_bytes));
}

}  // namespace hlocache::compiler
