// Cache keys: what identifies one executable.
//
//   key = "v1-" + hex(XXH3-128(domain tag, canonical module bytes, target, compiler id,
//                              sorted options))
//
// with every part length-prefixed, so no two part lists share a byte stream. Each part's own
// XXH3-128 is kept beside the key so that a miss can be explained part by part (`hlocache why`).
// This header knows nothing of HLO: the canonical module arrives as bytes.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hlocache::cache {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const Hash128&) const = default;
  std::string Hex() const;  // 32 lowercase hex digits, high half first.
};

Hash128 HashBytes(std::string_view bytes);

struct KeyInput {
  std::string_view canonical_module;
  std::string_view target;       // e.g. "cpu-x86-64-v3"
  std::string_view compiler_id;  // e.g. "gcc-12.2.0/hlocache-codegen-16/O2"
  std::vector<std::pair<std::string, std::string>> options;  // Any order; sorted here.
};

struct Key {
  std::string text;  // "v1-" + 32 hex digits.
  Hash128 graph;
  Hash128 target;
  Hash128 compiler_id;
  Hash128 options;
};

inline constexpr std::string_view kKeyPrefix = "v1-";
inline constexpr size_t kKeyLength = 3 + 32;

Key ComposeKey(const KeyInput& input);

// The key ComposeKey gives, for a canonical module that arrives in pieces and is never held
// whole (one decompressed from an artifact's graph, which a few kilobytes can make a gigabyte
// of). Its size must be known before its bytes: each part is hashed after its length.
// Thread safety: none; one module, one thread.
class StreamedKey {
 public:
  explicit StreamedKey(uint64_t module_bytes);
  ~StreamedKey();
  StreamedKey(const StreamedKey&) = delete;
  StreamedKey& operator=(const StreamedKey&) = delete;

  // The module's next bytes, in order.
  void Append(std::string_view piece);
  // The key, once exactly `module_bytes` have been appended; kInvalidArgument otherwise. The
  // options in any order, as KeyInput's.
  Result<Key> Finish(std::string_view target, std::string_view compiler_id,
                     std::vector<std::pair<std::string, std::string>> options = {});

 private:
  uint64_t expected_;
  uint64_t appended_ = 0;
  void* whole_;   // XXH3_state_t of the key's parts, kept out of this header.
  void* module_;  // XXH3_state_t of the module alone (Key::graph).
};

// The key of a file artifact (schema/file-artifacts.md): bytes another program built, kept
// under a name. key = "v1-" + hex(XXH3-128("hlocache-file-v1", namespace, path)), each part
// length-prefixed; the domain tag keeps it apart from every module's key. The caller validates
// both parts first (ValidateFileNamespace, ValidateFilePath).
std::string ComposeFileKey(std::string_view file_namespace, std::string_view path);

// A namespace is 1 to 64 characters of [A-Za-z0-9._-], not "." or "..".
Status ValidateFileNamespace(std::string_view file_namespace);
// A path is relative and '/'-separated: 1 to 4096 bytes of UTF-8 without NUL, no empty, "." or
// ".." component, each component at most 255 bytes (NAME_MAX).
Status ValidateFilePath(std::string_view path);

// True for "v1-" followed by exactly 32 lowercase hex digits: the only strings ever used as
// store keys or URL path segments.
bool IsWellFormedKey(std::string_view key);

// Targets and compiler ids are printable names: [A-Za-z0-9._+/-]{1,128}. Option keys likewise;
// option values any bytes without newlines.
Status ValidateTarget(std::string_view target);
Status ValidateCompilerId(std::string_view compiler_id);
Status ValidateOption(std::string_view key, std::string_view value);

}  // namespace hlocache::cache
