// cache::Store: the persistent artifact store on one directory.
//
// Layout of DIR:
//   DIR/blobs/           LevelDB: artifacts up to `chunk_bytes` as one record each; for larger
//                        ones, a record with each chunk's checksum (cache/blob_format.h).
//   DIR/large/           the bytes of artifacts larger than `chunk_bytes`, one file each
//                        (cache/blob_file.h), written and read a chunk at a time, so no reader or
//                        writer ever needs the whole artifact in memory.
//   DIR/catalog.sqlite   SQLite (WAL): one row per entry (size, XXH3-128, target, compiler id,
//                        created, last access, hits, compile time, graph name), counters and a
//                        quarantine log. Schema migrations from schema/catalog/ run at open.
//   DIR/lock             held (fcntl) by the one process that has the store open.
//   DIR/server.json      written by `hlocache serve`; named in "locked by" errors.
//
// Guarantees:
//   - Every read verifies the XXH3-128 of the bytes before it returns them (and a streaming
//     reader of a chunked artifact checks each chunk's XXH3-64 before handing it out). A mismatch
//     quarantines the entry: it is removed, counted, logged, and the caller sees a miss (Get) or an
//     error (a reader mid-stream). Bad bytes are never returned.
//   - A put is durable when it returns (its blob file synced, then a LevelDB sync write, unless
//     `sync_puts` is off) and atomic: after a crash at any instant (kill -9 included), reopening
//     finds every key either absent or intact. Open reconciles LevelDB with the catalog:
//     half-written chunked puts are removed (blob files no record names), catalog rows without
//     bytes dropped, committed bytes without a row re-catalogued.
//   - A chunked put writes at the disk's pace, one chunk at a time: at most two chunks are
//     unwritten in the page cache, so it never stops taking bytes for long, and its commit has
//     little left to sync.
//   - The read path touches LevelDB only. Access times and hit counts are buffered in memory and
//     written to the catalog in batches (every `access_flush_interval`, before eviction, at close).
//   - With `max_bytes` set, a put that takes the total past `high_water` x max_bytes evicts least-
//     recently-used entries (an index on last access, no scan) down to `low_water` x max_bytes.
//   - Keys must satisfy IsWellFormedKey (cache/key.h); no LevelDB key or path is ever built from
//     anything else.
//
// Errors (Status codes): kInvalidArgument (malformed key, bad options), kPermissionDenied
// (read-only store, unreadable directory), kUnavailable (locked by another process; the message
// names it), kResourceExhausted (disk full, artifact larger than the cap), kFailedPrecondition
// (catalog from a newer hlocache), kDataLoss (catalog unreadable, corruption found mid-stream),
// kIoError (anything else the filesystem reports).
//
// Thread safety: a Store is safe to use from any number of threads. Readers never wait for a
// writer of another key; puts and erases of the same key are serialized, and two concurrent puts
// of one key end with exactly one intact entry (the first to commit wins, the other reports
// kAlreadyPresent). One process at a time may open a directory: share it through the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key.h"
#include "common/status.h"

namespace hlocache::cache {

struct StoreOptions {
  bool read_only = false;
  // Create the store (DIR and its parents if needed) if there is none. Ignored when read_only.
  bool create_if_missing = true;
  // Size cap on the artifacts' bytes; 0 means none.
  uint64_t max_bytes = 0;
  double high_water = 1.0;  // Evict when the total exceeds high_water * max_bytes...
  double low_water = 0.9;   // ...down to low_water * max_bytes.
  // A put is refused (kResourceExhausted) when the filesystem would have less than this free
  // after it: LevelDB needs room to compact, and a store that fills the disk to the last byte
  // cannot even delete.
  uint64_t min_free_bytes = 64ull << 20;
  // Artifacts larger than this are stored in chunks of this size.
  uint32_t chunk_bytes = 4u << 20;
  // LevelDB block cache for hot artifacts.
  size_t block_cache_bytes = 64u << 20;
  // Sync every put to disk before it returns. Off only for benchmarks and throwaway stores.
  bool sync_puts = true;
  std::chrono::milliseconds access_flush_interval{1000};
  // One line per notable event (quarantine, eviction round, reconciliation). Default: stderr.
  std::function<void(std::string_view)> log;
};

// What the writer knows about an artifact; stored in the catalog.
struct ArtifactInfo {
  std::string target;
  std::string compiler_id;
  std::string graph_name;
  double compile_seconds = 0;
};

struct EntryInfo {
  std::string key;
  uint64_t size = 0;
  Hash128 checksum;  // XXH3-128 of the bytes.
  ArtifactInfo artifact;
  int64_t created_ms = 0;      // Unix milliseconds.
  int64_t last_access_ms = 0;  // As of the last flush of the access buffer.
  uint64_t hits = 0;
};

enum class PutOutcome { kStored, kAlreadyPresent };

// Catalog filters; empty strings and zeros match everything. Entries come least recently used
// first, or with `by_name` in graph-name order (how file artifacts are listed: their rows hold
// the namespace as compiler id and the path as graph name).
struct ListFilter {
  std::string target;
  std::string compiler_id;
  std::string graph_name_contains;
  int64_t accessed_before_ms = 0;  // Only entries last accessed before this time.
  size_t limit = 0;
  bool by_name = false;
  std::string graph_name_prefix;  // With by_name: only names that start with this...
  std::string graph_name_after;   // ...and sort after this (the last one of the page before).
};

struct StoreStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
  // Lifetime counters, kept in the catalog across restarts.
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t puts = 0;
  uint64_t evictions = 0;
  uint64_t quarantined = 0;
};

struct VerifyReport {
  uint64_t checked = 0;
  uint64_t bytes = 0;
  std::vector<std::string> corrupt;    // Keys quarantined by this run.
  uint64_t orphan_chunks_removed = 0;  // Chunk records and blob files no entry names.
};

// A verified, streamed read of one artifact. It reads from a consistent snapshot: an erase or
// eviction that happens meanwhile does not disturb it. Not thread-safe; use from one thread.
class ArtifactReader {
 public:
  virtual ~ArtifactReader() = default;
  virtual const EntryInfo& info() const = 0;  // key, size and checksum; the rest may be empty.
  // The next chunk of verified bytes, valid until the next call; an empty span at the end. A
  // chunk that fails verification quarantines the entry and returns kDataLoss: whatever the
  // caller already sent must be discarded.
  virtual Result<std::span<const char>> Next() = 0;
};

// A streamed put. Bytes are written in chunks as they arrive and become visible only at
// Commit(). Destroying a writer without committing removes everything it wrote. Not thread-safe.
class ArtifactWriter {
 public:
  virtual ~ArtifactWriter() = default;
  virtual Status Append(std::string_view bytes) = 0;
  virtual Result<PutOutcome> Commit() = 0;
};

class Store {
 public:
  // Opens (creating, unless read-only) the store in `dir`. Holds the directory's lock until the
  // Store is destroyed.
  static Result<std::unique_ptr<Store>> Open(const std::filesystem::path& dir,
                                             StoreOptions options = {});
  virtual ~Store() = default;

  // The verified bytes, or nullopt on a miss (absent, or quarantined just now).
  virtual Result<std::optional<std::string>> Get(std::string_view key) = 0;
  // A streamed read, or nullptr on a miss.
  virtual Result<std::unique_ptr<ArtifactReader>> OpenReader(std::string_view key) = 0;
  // Whether the key is present (its bytes are not read or verified).
  virtual Result<bool> Contains(std::string_view key) = 0;
  // Catalog row of one entry, or nullopt.
  virtual Result<std::optional<EntryInfo>> Info(std::string_view key) = 0;
  // Records a read of `key` (its access time and hit, as a read that returned its bytes would)
  // without reading or verifying the bytes, and returns their checksum; nullopt when absent.
  // For a caller that already holds a verified copy of the entry (the server's memory tier):
  // the checksum tells it whether the entry is still the one it copied.
  virtual Result<std::optional<Hash128>> Touch(std::string_view key) = 0;

  virtual Result<PutOutcome> Put(std::string_view key, std::string_view bytes,
                                 const ArtifactInfo& info) = 0;
  virtual Result<std::unique_ptr<ArtifactWriter>> StartPut(std::string_view key,
                                                           const ArtifactInfo& info) = 0;
  // True if the key was present.
  virtual Result<bool> Erase(std::string_view key) = 0;

  // Entries, least recently used first.
  virtual Result<std::vector<EntryInfo>> List(const ListFilter& filter) = 0;
  virtual Result<StoreStats> Stats() = 0;
  // Reads and verifies every entry, quarantining bad ones and removing orphan chunks.
  virtual Result<VerifyReport> VerifyAll() = 0;
  // Writes buffered access times and counters to the catalog now.
  virtual Status Flush() = 0;
  // Evicts least-recently-used entries until at most `target_bytes` remain; returns how many.
  virtual Result<uint64_t> EvictTo(uint64_t target_bytes) = 0;
  // Merges the byte store's files into their settled form now, instead of in the background as
  // writes go on: reclaims the space of erased entries and leaves reads one file per lookup.
  // Blocks until done (seconds for gigabytes); reads and writes may go on meanwhile.
  // kPermissionDenied on a read-only store.
  virtual Status Compact() = 0;

  virtual const std::filesystem::path& dir() const = 0;
  virtual bool read_only() const = 0;
};

}  // namespace hlocache::cache
