#include "storage/backend.h"

namespace hlocache::storage {

Result<std::optional<std::string>> Backend::Get(std::string_view key) {
  std::string body;
  ReadSink sink;
  sink.start = [&](uint64_t size) {
    body.reserve(static_cast<size_t>(size));  // An artifact is held whole anyway.
    return true;
  };
  sink.chunk = [&](std::string_view bytes) {
    body.append(bytes);
    return true;
  };
  HLOCACHE_ASSIGN_OR_RETURN(bool found, Read(key, sink));
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(std::move(body));
}

Status Backend::Put(std::string_view key, std::string_view bytes, const cache::ArtifactInfo& info) {
  bool sent = false;
  ChunkSource whole = [&]() -> Result<std::string_view> {
    if (sent) return std::string_view();
    sent = true;
    return bytes;
  };
  return Write(key, bytes.size(), whole, info);
}

}  // namespace hlocache::storage
