// File artifacts (payload kind `file`, schema/file-artifacts.md): bytes another program built,
// such as the XLA executables PyTorch/XLA and JAX keep in their cache directories, stored as an
// artifact so that the store, checksums, tiers, servers and tools treat them as any other.
//
// The payload is the file's bytes, unchanged. The header names the namespace and the path and
// nothing that varies: the same namespace and path always give the same header, so a
// container's size tells the file's size (FileArtifactOverhead) without reading it. The key is
// cache::ComposeFileKey(namespace, path), computed by the caller.
//
// Thread safety: pure functions and a value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "compiler/artifact/container.h"

namespace hlocache::compiler {

inline constexpr std::string_view kPayloadFile = "file";
// The header's `target` and `compiler_id` of every file artifact: it runs nowhere, and no
// compiler of ours built it.
inline constexpr std::string_view kFileTarget = "file";

ArtifactHeader FileArtifactHeader(std::string_view key, std::string_view file_namespace,
                                  std::string_view path);

// The container's size less the file's: what FileArtifactEncoder adds around the payload.
uint64_t FileArtifactOverhead(std::string_view key, std::string_view file_namespace,
                              std::string_view path);

// The whole container, for files that fit in memory.
std::string EncodeFileArtifact(std::string_view key, std::string_view file_namespace,
                               std::string_view path, std::string_view payload);

// The container a piece at a time, for files of any size: Prefix(), then the payload's bytes,
// each also given to Hash(), then Trailer().
class FileArtifactEncoder {
 public:
  FileArtifactEncoder(std::string_view key, std::string_view file_namespace, std::string_view path,
                      uint64_t payload_size);
  ~FileArtifactEncoder();
  FileArtifactEncoder(const FileArtifactEncoder&) = delete;
  FileArtifactEncoder& operator=(const FileArtifactEncoder&) = delete;

  const std::string& Prefix() const { return prefix_; }
  void Hash(std::string_view payload_bytes);
  // The 16-byte XXH3-128 over the prefix and the payload.
  std::string Trailer();

 private:
  std::string prefix_;
  void* state_;  // XXH3_state_t, kept out of this header.
};

// The namespace of a file artifact, from its first bytes (the container's prefix and header);
// empty for any other artifact. Cheap for those: a search of the header, no parse.
std::string PeekFileNamespace(std::string_view prefix);

// Whether `header` is that of a file artifact stored under `key` (a file artifact's payload kind,
// target and compiler id, a namespace and a path). Does not check that the key matches the
// namespace and path: the caller composes the key (cache::ComposeFileKey) and compares.
// kInvalidArgument with the reason otherwise.
Status CheckFileArtifactHeader(const ArtifactHeader& header, std::string_view key);

}  // namespace hlocache::compiler
