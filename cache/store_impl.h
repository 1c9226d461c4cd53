// Internal to the store (cache/store*.cc): the classes behind Store, ArtifactReader and
// ArtifactWriter, shared by the files that implement them by concern (open and recovery, reads,
// writes, eviction and verification). Nothing outside cache/ includes this header; the
// contract is cache/store.h's.
#pragma once

#include "cache/store.h"

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "cache/blob_file.h"
#include "cache/blob_format.h"
#include "cache/catalog.h"
#include "cache/dir_lock.h"
#include "common/fast_hash.h"
#include "common/trace.h"

namespace hlocache::cache::store_internal {

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// For access times: a coarse clock (a few ms resolution, no syscall) keeps the hot read path
// cheap; LRU order needs no better.
inline int64_t CoarseNowMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

inline Hash128 ToHash(XXH128_hash_t h) { return Hash128{h.high64, h.low64}; }

inline Status FromLevelDb(const leveldb::Status& s, std::string_view what) {
  std::string message = std::string(what) + ": " + s.ToString();
  if (s.IsIOError()) {
    if (message.find("No space left") != std::string::npos) {
      return ResourceExhausted(message + " (no space left on device)");
    }
    if (message.find("Permission denied") != std::string::npos ||
        message.find("Read-only file system") != std::string::npos) {
      return PermissionDenied(message);
    }
    return IoError(message);
  }
  if (s.IsCorruption()) return DataLoss(message);
  return IoError(message);
}

inline Status CheckKey(std::string_view key) {
  if (!IsWellFormedKey(key)) {
    return InvalidArgument("malformed cache key '" + std::string(key.substr(0, 80)) +
                           "' (expected v1- and 32 lowercase hex digits)");
  }
  return Status::Ok();
}

// A lock for critical sections of a few dozen nanoseconds (one hash-map update on the read
// path): uncontended it is one atomic exchange and one store, where std::mutex was two library
// calls costing as much as the rest of a 4 KiB get's bookkeeping. A waiter yields the CPU.
class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Buffered access statistics: the read path adds to a sharded map, a background thread (and
// eviction, and close) drains it into the catalog. Sharding keeps concurrent readers of
// different keys off one lock.
class AccessBuffer {
 public:
  void Record(std::string_view key, int64_t now_ms) {
    Shard& shard = shards_[static_cast<uint8_t>(key.back()) % kShards];
    std::lock_guard<SpinLock> lock(shard.mu);
    auto it = shard.pending.find(key);
    if (it == shard.pending.end()) it = shard.pending.emplace(std::string(key), Pending{}).first;
    it->second.last_access_ms = std::max(it->second.last_access_ms, now_ms);
    ++it->second.hits;
  }

  std::vector<AccessUpdate> Drain() {
    std::vector<AccessUpdate> out;
    for (Shard& shard : shards_) {
      std::unordered_map<std::string, Pending, Hash, std::equal_to<>> taken;
      {
        std::lock_guard<SpinLock> lock(shard.mu);
        taken.swap(shard.pending);
      }
      for (auto& [key, p] : taken) out.push_back({key, p.last_access_ms, p.hits});
    }
    return out;
  }

 private:
  struct Pending {
    int64_t last_access_ms = 0;
    uint64_t hits = 0;
  };
  // Keys are well formed (checked before any read), so their last 16 characters are hex digits
  // of a hash already: eight of them, mixed once, make a good bucket hash at no cost.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const {
      if (s.size() < 8) return std::hash<std::string_view>()(s);
      uint64_t tail = 0;
      std::memcpy(&tail, s.data() + s.size() - 8, 8);
      return static_cast<size_t>((tail * 0x9e3779b97f4a7c15ull) >> 16);
    }
  };
  struct alignas(64) Shard {  // One cache line each: readers of two shards share nothing.
    SpinLock mu;
    std::unordered_map<std::string, Pending, Hash, std::equal_to<>> pending;
  };
  static constexpr size_t kShards = 16;
  std::array<Shard, kShards> shards_;
};

class StoreImpl;

class ReaderImpl final : public ArtifactReader {
 public:
  // `record` is an entry record already parsed once without error.
  ReaderImpl(StoreImpl* store, std::string key, const leveldb::Snapshot* snapshot,
             std::string record);
  ~ReaderImpl() override;
  const EntryInfo& info() const override { return info_; }
  Result<std::span<const char>> Next() override { return NextInto(nullptr); }
  // Next(), and when `dest` is set the chunk is also appended to it. Get uses this to copy and
  // hash each slice while it is in cache (one pass through memory, not three), and then relies
  // on the whole checksum alone, checked before anything is returned. On a checksum failure
  // `dest` holds bad bytes: the caller drops them.
  Result<std::span<const char>> NextInto(std::string* dest);

 private:
  Result<std::span<const char>> NextFromBlobFile(uint32_t index, std::string* dest);

  StoreImpl* store_;
  const leveldb::Snapshot* snapshot_;  // Null for inline entries: the record is all there is.
  std::string record_;                 // Owns what parsed_ points into.
  blob::EntryRecord parsed_;
  EntryInfo info_;
  uint32_t next_chunk_ = 0;
  bool done_ = false;
  // Chunked entries: an iterator over the chunk records (from the snapshot). Next() hands out
  // its value in place (a view into the table file's mapping or the block cache, pinned until
  // the iterator moves): no copy of a multi-MiB chunk on the way out.
  std::unique_ptr<leveldb::Iterator> chunks_;
  std::string expected_chunk_key_;
  // Chunked entries in a blob file (the newer layout): the file, opened by the store, and the
  // chunk last read from it.
  std::unique_ptr<BlobFileReader> file_;
  std::string chunk_buffer_;
  XXH3_state_t* chunk_hash_ = nullptr;
  XXH3_state_t* whole_ = nullptr;

  friend class StoreImpl;
};

class WriterImpl final : public ArtifactWriter {
 public:
  WriterImpl(StoreImpl* store, std::string key, ArtifactInfo info, uint64_t generation);
  ~WriterImpl() override;
  Status Append(std::string_view bytes) override;
  Result<PutOutcome> Commit() override;

 private:
  Status FlushChunk();
  void Discard();

  StoreImpl* store_;
  std::string key_;
  ArtifactInfo info_;
  uint64_t generation_;
  std::unique_ptr<BlobFileWriter> file_;  // Created with the first full chunk.
  std::string buffer_;
  std::vector<uint64_t> chunk_hashes_;
  uint64_t size_ = 0;
  XXH3_state_t* whole_;
  bool finished_ = false;
  Status failed_;
};

class StoreImpl final : public Store {
 public:
  StoreImpl(std::filesystem::path dir, StoreOptions options)
      : dir_(std::move(dir)), large_dir_(dir_ / "large"), options_(std::move(options)) {
    if (!options_.log) {
      options_.log = [](std::string_view line) {
        std::fprintf(stderr, "hlocache: store: %.*s\n", static_cast<int>(line.size()), line.data());
      };
    }
    std::random_device rd;
    next_generation_ =
        (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(NowMs()) << 20;
  }

  ~StoreImpl() override {
    if (flusher_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(flusher_mu_);
        stopping_ = true;
      }
      flusher_cv_.notify_all();
      flusher_.join();
    }
    if (opened_) {
      Status s = Flush();
      if (!s.ok()) options_.log("flush at close failed: " + s.message());
      if (!options_.read_only && s.ok()) {
        leveldb::WriteOptions sync;
        sync.sync = true;
        // Everything the catalog needs is in it: the next open may skip reconciliation.
        leveldb::Status ls = db_->Put(sync, std::string(blob::kCleanShutdownKey), "1");
        if (!ls.ok()) options_.log("cannot mark clean close: " + ls.ToString());
      }
    }
    catalog_.reset();
    db_.reset();
    block_cache_.reset();
    filter_policy_.reset();
  }

  Status Init();

  Result<std::optional<std::string>> Get(std::string_view key) override;
  Result<std::unique_ptr<ArtifactReader>> OpenReader(std::string_view key) override;
  Result<std::unique_ptr<ReaderImpl>> OpenReaderImpl(std::string_view key);
  Result<bool> Contains(std::string_view key) override;
  Result<std::optional<EntryInfo>> Info(std::string_view key) override;
  Result<std::optional<Hash128>> Touch(std::string_view key) override;
  Result<PutOutcome> Put(std::string_view key, std::string_view bytes,
                         const ArtifactInfo& info) override;
  Result<std::unique_ptr<ArtifactWriter>> StartPut(std::string_view key,
                                                   const ArtifactInfo& info) override;
  Result<bool> Erase(std::string_view key) override;
  Result<std::vector<EntryInfo>> List(const ListFilter& filter) override;
  Result<StoreStats> Stats() override;
  Result<VerifyReport> VerifyAll() override;
  Status Flush() override;
  Result<uint64_t> EvictTo(uint64_t target_bytes) override;
  Status Compact() override;
  const std::filesystem::path& dir() const override { return dir_; }
  bool read_only() const override { return options_.read_only; }

  // ---- used by the reader and writer ----
  leveldb::DB* db() { return db_.get(); }
  const StoreOptions& options() const { return options_; }
  void RecordHit(std::string_view key) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (!options_.read_only) access_.Record(key, CoarseNowMs());
  }
  // Removes an entry whose bytes failed verification, if it is still generation `generation`.
  void Quarantine(const std::string& key, uint64_t generation, const std::string& reason);
  Status CheckSpace(uint64_t incoming) const;
  Status CheckWritable() const {
    if (options_.read_only) {
      return PermissionDenied("store " + dir_.string() + " is open read-only; writes are refused");
    }
    return Status::Ok();
  }
  Status CheckSize(uint64_t size) const {
    if (options_.max_bytes != 0 && size > options_.max_bytes) {
      return ResourceExhausted("artifact of " + std::to_string(size) +
                               " bytes is larger than the store's cap of " +
                               std::to_string(options_.max_bytes) + " bytes");
    }
    return Status::Ok();
  }
  // The commit step shared by whole and streamed puts: under the key's lock, unless the key is
  // already present, writes `batch` (which holds the entry and index records) synchronously and
  // catalogs the entry. `abandon` is run when the key turned out to be present or the write
  // failed, to remove what the caller wrote before.
  Result<PutOutcome> CommitPut(const std::string& key, leveldb::WriteBatch& batch,
                               const blob::IndexRecord& index,
                               const std::function<void()>& abandon);
  std::mutex& KeyLock(std::string_view key) {
    return key_locks_[std::hash<std::string_view>()(key) % key_locks_.size()];
  }
  uint64_t NewGeneration() { return next_generation_.fetch_add(1); }

  // Blob files of chunked entries, and the ones puts of this process are writing now (which
  // no record names yet, and no orphan sweep may take).
  std::filesystem::path BlobPath(std::string_view key, uint64_t generation) const {
    return large_dir_ / BlobFileName(key, generation);
  }
  Result<std::unique_ptr<BlobFileWriter>> CreateBlobFile(std::string_view key, uint64_t generation);
  void BlobFileDone(std::string_view key, uint64_t generation);

 private:
  // Removes blob files that no entry record names (a put cut short by a crash, an erase whose
  // unlink failed), except those being written. Returns how many.
  Result<uint64_t> SweepOrphanBlobFiles();
  // The entry record at `entry_key` as of `snapshot` (null: the latest) into `record`; false,
  // and a miss counted, when there is none.
  Result<bool> ReadEntryRecord(std::string_view entry_key, const leveldb::Snapshot* snapshot,
                               std::string& record);
  // Opens the blob file of a chunked entry for `reader`; false (after quarantining the entry,
  // unless it was replaced or erased meanwhile) when the file is missing or has the wrong size.
  Result<bool> OpenBlobFile(ReaderImpl& reader);
  Status Reconcile(bool full);
  Status RemovePendingPuts(uint64_t& removed);
  // With the key's lock held: deletes the entry's records; its size, or nullopt if absent.
  Result<std::optional<uint64_t>> EraseLocked(const std::string& key, bool sync);
  Status LoadCounters();
  std::map<std::string, uint64_t> CounterSnapshot() const;
  void MaybeEvict(std::string_view just_stored);
  Result<uint64_t> EvictToKeeping(uint64_t target_bytes, std::string_view keep);
  void FlusherLoop();

  std::filesystem::path dir_;
  std::filesystem::path large_dir_;  // DIR/large: blob files.
  StoreOptions options_;
  std::unique_ptr<DirLock> lock_;
  std::mutex writing_mu_;
  std::set<std::string> writing_;  // Blob file names of puts in progress; guarded by writing_mu_.
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy_;
  std::unique_ptr<leveldb::Cache> block_cache_;
  std::unique_ptr<leveldb::DB> db_;
  std::mutex catalog_mu_;  // Guards catalog_.
  std::unique_ptr<Catalog> catalog_;
  std::map<std::string, uint64_t> saved_counters_;  // As last written; guarded by catalog_mu_.
  std::array<std::mutex, 64> key_locks_;
  std::mutex evict_mu_;
  AccessBuffer access_;
  std::atomic<uint64_t> next_generation_{0};
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> hits_{0}, misses_{0}, puts_{0}, evictions_{0}, quarantined_{0};

  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stopping_ = false;
  bool opened_ = false;  // Init finished: the store is consistent and may be marked clean.
};

}  // namespace hlocache::cache::store_internal
