// Compiler outputs kept on disk by their inputs: a generated translation unit that this user's
// processes compiled before, with the same compiler and flags, is not compiled again.
//
// The artifact store already keeps whole executables by the module's key. This cache sits one
// level below it, at the C++ compiler: a module that changed in a few computations recompiles
// only the translation units whose text changed (the CPU generator cuts large modules into
// units, cpu_units.h), and separate stores on one host (a test's, a CI job's, a second server's)
// share what they compiled. It is to the toolchain what ccache is to a build.
//
// Layout: ROOT/<2 hex>/<30 hex>, the 32 digits a hash (XXH3-128) of the entry's key text (the
// compiler's identity, its flags and the unit's text, as the caller composes them). An entry is
// a magic, the XXH3-64 of its bytes and the bytes: a damaged or partly written entry is found
// out on reading, removed and reported as a miss. Entries are written aside and renamed into
// place; a read touches the entry, and the least recently used entries are removed when an
// object's first store (and every 32nd after) finds the whole over its byte bound.
//
// Failure-tolerant by design: every failure (a root that cannot be made, a full disk, a racing
// remover) is a miss or a store not made, never an error; the caller then compiles.
//
// Thread safety: any number of threads and processes may use one root at once. Two that store
// the same key at once each rename a complete entry into place; the last one stays.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace hlocache::compiler {

// $HLOCACHE_OBJECT_CACHE ("-": none), else $XDG_CACHE_HOME/hlocache/objects, else
// $HOME/.cache/hlocache/objects; empty when none is set (no cache).
std::filesystem::path DefaultObjectCacheRoot();

class ObjectCache {
 public:
  // A cache under `root` (made when first stored to) holding at most about `max_bytes`; an
  // empty root is a cache that never holds anything.
  ObjectCache(std::filesystem::path root, uint64_t max_bytes);

  bool enabled() const { return !root_.empty(); }

  // The bytes stored for `key`, verified; nullopt on a miss (a damaged entry is removed).
  std::optional<std::string> Find(std::string_view key) const;

  // Keeps `bytes` for `key`; now and then removes least recently used entries past the bound.
  // Best-effort: a store that fails leaves the cache as it was.
  void Store(std::string_view key, std::string_view bytes) const;

  // The entry's path for `key` (for tests and diagnostics).
  std::filesystem::path PathOf(std::string_view key) const;

 private:
  void Prune() const;

  std::filesystem::path root_;
  uint64_t max_bytes_;
  mutable std::atomic<uint64_t> stores_{0};
};

}  // namespace hlocache::compiler
