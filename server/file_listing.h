// Listings of file artifacts (schema/file-artifacts.md): the names a namespace holds under a
// prefix, with each file's size, from a store's catalog, never from a scan of the bytes. What
// GET /v1/files/{namespace} answers, what a host's server merges with its origin's, and what
// `hlocache mount` lists directories from.
//
// The wire form is NDJSON, one object per line in path order:
//   {"path":"jax/abc-cache","size":1048576,"key":"v1-..."}
// `size` is the file's bytes (the artifact's less its container).
//
// Thread safety: pure functions; the store is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.h"
#include "common/status.h"

namespace hlocache::server {

struct FileEntry {
  std::string path;
  uint64_t size = 0;  // The file's bytes.
  std::string key;
  bool operator==(const FileEntry&) const = default;
};

// At most `limit` (0: every) file artifacts of `file_namespace` whose path starts with
// `prefix`, in path order, from the store's catalog.
Result<std::vector<FileEntry>> ListStoreFiles(cache::Store& store, std::string_view file_namespace,
                                              std::string_view prefix, size_t limit = 0);

std::string FormatFileListing(const std::vector<FileEntry>& entries);
// kInvalidArgument for a line that is not such an object.
Result<std::vector<FileEntry>> ParseFileListing(std::string_view ndjson);

// Both lists (each in path order) as one, in path order; where a path is in both, `first`'s.
std::vector<FileEntry> MergeFileListings(std::vector<FileEntry> first,
                                         std::vector<FileEntry> second);

}  // namespace hlocache::server
