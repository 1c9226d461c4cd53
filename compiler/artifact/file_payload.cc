#include "compiler/artifact/file_payload.h"

#include "common/fast_hash.h"

namespace hlocache::compiler {
namespace {

// Where EncodeArtifactWithRawHeader puts the payload: after the magic, version, header length,
// header and payload length.
constexpr uint64_t kBytesBeforeHeader = 16;
constexpr uint64_t kPayloadLengthBytes = 8;
constexpr uint64_t kTrailerBytes = 16;

}  // namespace

ArtifactHeader FileArtifactHeader(std::string_view key, std::string_view file_namespace,
                                  std::string_view path) {
  ArtifactHeader h;
  h.key = std::string(key);
  h.target = std::string(kFileTarget);
  h.compiler_id = std::string(kFileTarget);
  h.payload_kind = std::string(kPayloadFile);
  h.file_namespace = std::string(file_namespace);
  h.file_path = std::string(path);
  return h;
}

uint64_t FileArtifactOverhead(std::string_view key, std::string_view file_namespace,
                              std::string_view path) {
  return EncodeArtifact(FileArtifactHeader(key, file_namespace, path), {}).size();
}

std::string EncodeFileArtifact(std::string_view key, std::string_view file_namespace,
                               std::string_view path, std::string_view payload) {
  return EncodeArtifact(FileArtifactHeader(key, file_namespace, path), payload);
}

FileArtifactEncoder::FileArtifactEncoder(std::string_view key, std::string_view file_namespace,
                                         std::string_view path, uint64_t payload_size) {
  // The container of an empty payload is the prefix with a zero length and a trailer: take its
  // prefix and put the real length in.
  std::string empty = EncodeArtifact(FileArtifactHeader(key, file_namespace, path), {});
  prefix_ = empty.substr(0, empty.size() - kTrailerBytes);
  const size_t length_at = prefix_.size() - kPayloadLengthBytes;
  for (size_t i = 0; i < kPayloadLengthBytes; ++i) {
    prefix_[length_at + i] = static_cast<char>((payload_size >> (8 * i)) & 0xff);
  }
  static_assert(kBytesBeforeHeader == 16);
  auto* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, prefix_.data(), prefix_.size());
  state_ = state;
}

FileArtifactEncoder::~FileArtifactEncoder() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void FileArtifactEncoder::Hash(std::string_view payload_bytes) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), payload_bytes.data(),
                      payload_bytes.size());
}

std::string FileArtifactEncoder::Trailer() {
  const XXH128_hash_t sum = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  std::string out;
  for (uint64_t half : {sum.high64, sum.low64}) {
    for (int i = 7; i >= 0; --i) out += static_cast<char>((half >> (8 * i)) & 0xff);
  }
  return out;
}

std::string PeekFileNamespace(std::string_view prefix) {
  if (PeekHeaderText(prefix).find("\"payload_kind\":\"file\"") == std::string_view::npos) {
    return {};
  }
  auto parsed = PeekArtifactHeader(prefix);
  return parsed && parsed->payload_kind == kPayloadFile ? parsed->file_namespace : std::string();
}

Status CheckFileArtifactHeader(const ArtifactHeader& header, std::string_view key) {
  if (header.payload_kind != kPayloadFile) {
    return InvalidArgument("payload kind '" + header.payload_kind + "' is not a file's");
  }
  if (header.key != key) {
    return InvalidArgument("the file artifact was stored for key " + header.key + ", not " +
                           std::string(key));
  }
  if (header.target != kFileTarget || header.compiler_id != kFileTarget) {
    return InvalidArgument("a file artifact's target and compiler id are 'file', not '" +
                           header.target + "' and '" + header.compiler_id + "'");
  }
  if (header.file_namespace.empty() || header.file_path.empty()) {
    return InvalidArgument("a file artifact's header names no namespace or path");
  }
  return Status::Ok();
}

}  // namespace hlocache::compiler
