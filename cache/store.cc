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

namespace hlocache::cache {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// For access times: a coarse clock (a few ms resolution, no syscall) keeps the hot read path
// cheap; LRU order needs no better.
int64_t CoarseNowMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Hash128 ToHash(XXH128_hash_t h) { return Hash128{h.high64, h.low64}; }

Status FromLevelDb(const leveldb::Status& s, std::string_view what) {
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

Status CheckKey(std::string_view key) {
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

// ---------------------------------------------------------------------------------------------
// Open and reconciliation

Status StoreImpl::Init() {
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) {
    if (options_.read_only || !options_.create_if_missing) {
      return NotFound("no store at " + dir_.string());
    }
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      const std::string message = "cannot create store " + dir_.string() + ": " + ec.message();
      if (ec == std::errc::permission_denied || ec == std::errc::read_only_file_system) {
        return PermissionDenied(message);
      }
      return IoError(message);
    }
  }
  if ((options_.read_only || !options_.create_if_missing) &&
      !std::filesystem::exists(dir_ / "blobs", ec)) {
    return NotFound("no store at " + dir_.string() + " (no blobs/ inside)");
  }
  HLOCACHE_ASSIGN_OR_RETURN(lock_, DirLock::Acquire(dir_));

  leveldb::Options lo;
  lo.create_if_missing = !options_.read_only;
  // Small memtables: reopening replays the log into a table, which needs that much free disk,
  // and a full disk must not make the store unopenable. Big artifacts are chunked anyway.
  lo.write_buffer_size = 4u << 20;
  lo.max_file_size = 16u << 20;
  lo.compression = leveldb::kNoCompression;  // Executables and random test data barely compress.
  // A get probes every level-0 table its key might be in; a Bloom filter skips the others.
  filter_policy_.reset(leveldb::NewBloomFilterPolicy(10));
  lo.filter_policy = filter_policy_.get();
  block_cache_.reset(leveldb::NewLRUCache(options_.block_cache_bytes));
  lo.block_cache = block_cache_.get();
  leveldb::DB* raw = nullptr;
  leveldb::Status ls = leveldb::DB::Open(lo, (dir_ / "blobs").string(), &raw);
  if (!ls.ok() && ls.IsIOError() &&
      ls.ToString().find("No space left on device") != std::string::npos) {
    // Recovery writes every log it replays into a new table before deleting the log: up to two
    // memtables' worth when the disk filled up while one was being flushed (and tables whose
    // flush could not be recorded still sit there until the open succeeds). Reusing the last
    // log instead of rewriting it needs half that space; the memtable must then hold the whole
    // log (one memtable plus the batch that overflowed it, a chunk at most) or replay flushes
    // it anyway. The bigger memtable lasts until the next open.
    options_.log("reopening on a full disk: replaying the last log in place (" + ls.ToString() +
                 ")");
    lo.reuse_logs = true;
    lo.write_buffer_size += options_.chunk_bytes + (1u << 20);
    ls = leveldb::DB::Open(lo, (dir_ / "blobs").string(), &raw);
  }
  if (!ls.ok()) return FromLevelDb(ls, "cannot open " + (dir_ / "blobs").string());
  db_.reset(raw);

  HLOCACHE_ASSIGN_OR_RETURN(catalog_, Catalog::Open(dir_ / "catalog.sqlite", options_.read_only));
  HLOCACHE_RETURN_STATUS_IF_ERROR(LoadCounters());

  if (!options_.read_only) {
    std::string marker;
    const bool clean =
        db_->Get(leveldb::ReadOptions(), std::string(blob::kCleanShutdownKey), &marker).ok();
    HLOCACHE_RETURN_STATUS_IF_ERROR(Reconcile(/*full=*/!clean));
    std::filesystem::create_directories(large_dir_, ec);
    if (ec) return IoError("cannot create " + large_dir_.string() + ": " + ec.message());
    HLOCACHE_ASSIGN_OR_RETURN(const uint64_t orphans, SweepOrphanBlobFiles());
    if (orphans) {
      options_.log("removed " + std::to_string(orphans) +
                   " blob files of puts that never committed");
    }
    if (clean) {
      leveldb::WriteOptions sync;
      sync.sync = true;
      // From here on a crash must lead to a full reconciliation.
      ls = db_->Delete(sync, std::string(blob::kCleanShutdownKey));
      if (!ls.ok()) return FromLevelDb(ls, "cannot open " + dir_.string());
    }
  }
  HLOCACHE_ASSIGN_OR_RETURN(auto totals, catalog_->Totals());
  entries_ = totals.first;
  bytes_ = totals.second;
  if (!options_.read_only) {
    flusher_ = std::thread([this] { FlusherLoop(); });
    if (options_.max_bytes != 0) MaybeEvict({});
  }
  opened_ = true;
  return Status::Ok();
}

// Chunked puts that never committed leave chunks behind under a 'p' record; remove them.
Status StoreImpl::RemovePendingPuts(uint64_t& removed) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  std::vector<std::string> pending;
  for (it->Seek(std::string(1, blob::kPendingTag));
       it->Valid() && it->key().size() > 0 && it->key()[0] == blob::kPendingTag; it->Next()) {
    pending.push_back(it->key().ToString());
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "cannot scan pending puts");
  for (const std::string& p : pending) {
    std::string_view key;
    uint64_t generation = 0;
    leveldb::WriteBatch batch;
    batch.Delete(p);
    if (blob::ParseGenerationKey(p, key, generation)) {
      const std::string prefix = blob::ChunkPrefix(key, generation);
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        batch.Delete(it->key());
      }
    }
    leveldb::Status ls = db_->Write(leveldb::WriteOptions(), &batch);
    if (!ls.ok()) return FromLevelDb(ls, "cannot remove an unfinished put");
    ++removed;
  }
  return Status::Ok();
}

Status StoreImpl::Reconcile(bool full) {
  uint64_t unfinished = 0;
  HLOCACHE_RETURN_STATUS_IF_ERROR(RemovePendingPuts(unfinished));
  if (!full) return Status::Ok();
  // Merge the sorted LevelDB index records with the sorted catalog keys: rows without bytes
  // are dropped, bytes without a row (a crash between the two commits) are catalogued again.
  std::lock_guard<std::mutex> lock(catalog_mu_);
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> rows, catalog_->AllKeys());
  uint64_t added = 0, dropped = 0;
  HLOCACHE_RETURN_STATUS_IF_ERROR(catalog_->Begin());
  auto fail = [&](Status s) {
    catalog_->Rollback();
    return s;
  };
  size_t r = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(std::string(1, blob::kIndexTag));
       it->Valid() && it->key().size() > 0 && it->key()[0] == blob::kIndexTag; it->Next()) {
    const std::string key = it->key().ToString().substr(1);
    for (; r < rows.size() && rows[r] < key; ++r, ++dropped) {
      if (Status s = catalog_->Delete(rows[r]); !s.ok()) return fail(s);
    }
    if (r < rows.size() && rows[r] == key) {
      ++r;
      continue;
    }
    auto index = blob::ParseIndexRecord(std::string_view(it->value().data(), it->value().size()));
    if (!index) {
      options_.log("ignoring unreadable index record of " + key + ": " + index.error().message());
      continue;
    }
    EntryInfo e;
    e.key = key;
    e.size = index->size;
    e.checksum = index->checksum;
    e.artifact = index->artifact;
    e.created_ms = index->created_ms;
    e.last_access_ms = index->created_ms;
    if (Status s = catalog_->Insert(e); !s.ok()) return fail(s);
    ++added;
  }
  if (!it->status().ok()) return fail(FromLevelDb(it->status(), "cannot scan the index"));
  for (; r < rows.size(); ++r, ++dropped) {
    if (Status s = catalog_->Delete(rows[r]); !s.ok()) return fail(s);
  }
  HLOCACHE_RETURN_STATUS_IF_ERROR(catalog_->Commit());
  if (added || dropped || unfinished) {
    options_.log("recovered after an unclean shutdown: " + std::to_string(added) +
                 " entries re-catalogued, " + std::to_string(dropped) +
                 " catalog rows without bytes dropped, " + std::to_string(unfinished) +
                 " unfinished puts removed");
  }
  return Status::Ok();
}

Result<uint64_t> StoreImpl::SweepOrphanBlobFiles() {
  std::error_code ec;
  std::filesystem::directory_iterator it(large_dir_, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return uint64_t{0};
    return Error(IoError("cannot list " + large_dir_.string() + ": " + ec.message()));
  }
  uint64_t removed = 0;
  for (const auto& file : it) {
    const std::string name = file.path().filename().string();
    std::string key;
    uint64_t generation = 0;
    if (!ParseBlobFileName(name, key, generation)) continue;  // Not ours: left alone.
    {
      std::lock_guard<std::mutex> lock(writing_mu_);
      if (writing_.count(name)) continue;
    }
    std::lock_guard<std::mutex> key_lock(KeyLock(key));
    std::string record;
    leveldb::Status ls = db_->Get(leveldb::ReadOptions(), blob::EntryKey(key), &record);
    if (!ls.ok() && !ls.IsNotFound()) return Error(FromLevelDb(ls, "cannot read " + key));
    if (ls.ok()) {
      auto parsed = blob::ParseEntryRecord(record);
      if (parsed && parsed->layout.in_blob_file && parsed->layout.generation == generation) {
        continue;  // Live.
      }
    }
    {
      // A put may have started on this name since the listing.
      std::lock_guard<std::mutex> lock(writing_mu_);
      if (writing_.count(name)) continue;
    }
    if (::unlink(file.path().c_str()) == 0) ++removed;
  }
  return removed;
}

Result<std::unique_ptr<BlobFileWriter>> StoreImpl::CreateBlobFile(std::string_view key,
                                                                  uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(writing_mu_);
    writing_.insert(BlobFileName(key, generation));
  }
  auto file = BlobFileWriter::Create(BlobPath(key, generation), options_.sync_puts);
  if (!file) BlobFileDone(key, generation);
  return file;
}

void StoreImpl::BlobFileDone(std::string_view key, uint64_t generation) {
  std::lock_guard<std::mutex> lock(writing_mu_);
  writing_.erase(BlobFileName(key, generation));
}

Status StoreImpl::LoadCounters() {
  std::lock_guard<std::mutex> lock(catalog_mu_);
  HLOCACHE_ASSIGN_OR_RETURN(auto counters, catalog_->LoadCounters());
  hits_ = counters["hits"];
  misses_ = counters["misses"];
  puts_ = counters["puts"];
  evictions_ = counters["evictions"];
  quarantined_ = counters["quarantined"];
  saved_counters_ = CounterSnapshot();
  return Status::Ok();
}

std::map<std::string, uint64_t> StoreImpl::CounterSnapshot() const {
  return {{"hits", hits_.load()},
          {"misses", misses_.load()},
          {"puts", puts_.load()},
          {"evictions", evictions_.load()},
          {"quarantined", quarantined_.load()}};
}

void StoreImpl::FlusherLoop() {
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!stopping_) {
    flusher_cv_.wait_for(lock, options_.access_flush_interval, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    Status s = Flush();
    if (!s.ok()) options_.log("cannot record access times: " + s.message());
    lock.lock();
  }
}

Status StoreImpl::Flush() {
  if (options_.read_only) return Status::Ok();
  std::vector<AccessUpdate> updates = access_.Drain();
  std::lock_guard<std::mutex> lock(catalog_mu_);
  HLOCACHE_RETURN_STATUS_IF_ERROR(catalog_->ApplyAccesses(updates));
  std::map<std::string, uint64_t> counters = CounterSnapshot();
  if (counters == saved_counters_) return Status::Ok();  // An idle store writes nothing.
  HLOCACHE_RETURN_STATUS_IF_ERROR(catalog_->SaveCounters(counters));
  saved_counters_ = std::move(counters);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Reads

Result<std::optional<std::string>> StoreImpl::Get(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  std::string record;
  char entry_key[64];  // The tag and the key, without a heap allocation.
  entry_key[0] = blob::kEntryTag;
  key.copy(entry_key + 1, key.size());
  leveldb::Status ls =
      db_->Get(leveldb::ReadOptions(), leveldb::Slice(entry_key, key.size() + 1), &record);
  if (ls.IsNotFound()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::optional<std::string>();
  }
  if (!ls.ok()) return Error(FromLevelDb(ls, "cannot read " + std::string(key)));
  auto parsed = blob::ParseEntryRecord(record);
  if (!parsed) {
    Quarantine(std::string(key), 0, parsed.error().message());
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::optional<std::string>();
  }
  if (parsed->layout.is_inline()) {
    const blob::EntryLayout layout = parsed->layout;
    if (ToHash(XXH3_128bits(record.data(), layout.size)) != layout.checksum) {
      Quarantine(std::string(key), layout.generation, "checksum mismatch");
      misses_.fetch_add(1, std::memory_order_relaxed);
      return std::optional<std::string>();
    }
    record.resize(layout.size);  // Drops the trailer in place: no copy.
    RecordHit(key);
    return std::optional<std::string>(std::move(record));
  }
  // Chunked: stream it through a reader, which reads from a snapshot.
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<ReaderImpl> reader, OpenReaderImpl(key));
  if (!reader) return std::optional<std::string>();
  std::string out;
  out.reserve(reader->info().size);
  while (true) {
    auto chunk = reader->NextInto(&out);
    if (!chunk) {
      if (chunk.error().code() == StatusCode::kDataLoss) {
        // Already quarantined by the reader; the caller sees a miss.
        misses_.fetch_add(1, std::memory_order_relaxed);
        return std::optional<std::string>();
      }
      return Error(chunk.error());
    }
    if (chunk->empty()) break;
  }
  return std::optional<std::string>(std::move(out));
}

Result<std::unique_ptr<ArtifactReader>> StoreImpl::OpenReader(std::string_view key) {
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<ReaderImpl> reader, OpenReaderImpl(key));
  return std::unique_ptr<ArtifactReader>(std::move(reader));
}

Result<std::unique_ptr<ReaderImpl>> StoreImpl::OpenReaderImpl(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  const leveldb::Snapshot* snapshot = db_->GetSnapshot();
  leveldb::ReadOptions ro;
  ro.snapshot = snapshot;
  std::string record;
  leveldb::Status ls = db_->Get(ro, blob::EntryKey(key), &record);
  if (!ls.ok()) {
    db_->ReleaseSnapshot(snapshot);
    if (ls.IsNotFound()) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return std::unique_ptr<ReaderImpl>();
    }
    return Error(FromLevelDb(ls, "cannot read " + std::string(key)));
  }
  auto parsed = blob::ParseEntryRecord(record);
  if (!parsed) {
    db_->ReleaseSnapshot(snapshot);
    Quarantine(std::string(key), 0, parsed.error().message());
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::unique_ptr<ReaderImpl>();
  }
  if (parsed->layout.is_inline() || parsed->layout.in_blob_file) {
    // The record is all there is, or the open file is the snapshot: an erase unlinks the name,
    // and the bytes stay readable through the descriptor.
    db_->ReleaseSnapshot(snapshot);
    snapshot = nullptr;
  }
  const bool in_blob_file = parsed->layout.in_blob_file;
  std::unique_ptr<ReaderImpl> reader(
      new ReaderImpl(this, std::string(key), snapshot, std::move(record)));
  if (in_blob_file) {
    HLOCACHE_ASSIGN_OR_RETURN(const bool opened, OpenBlobFile(*reader));
    if (!opened) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return std::unique_ptr<ReaderImpl>();
    }
  }
  return reader;
}

Result<bool> StoreImpl::OpenBlobFile(ReaderImpl& reader) {
  const std::string& key = reader.info_.key;
  const blob::EntryLayout& layout = reader.parsed_.layout;
  auto file = BlobFileReader::Open(BlobPath(key, layout.generation));
  std::string problem;
  if (file && (*file)->size() == layout.size) {
    reader.file_ = std::move(*file);
    return true;
  }
  if (file) {
    problem = "its blob file has " + std::to_string((*file)->size()) + " bytes, not " +
              std::to_string(layout.size);
  } else if (file.error().code() == StatusCode::kNotFound) {
    // Erased or replaced since its record was read? Then this is an ordinary miss.
    std::string record;
    if (!db_->Get(leveldb::ReadOptions(), blob::EntryKey(key), &record).ok()) return false;
    auto parsed = blob::ParseEntryRecord(record);
    if (parsed && parsed->layout.generation != layout.generation) return false;
    problem = "its blob file is missing";
  } else {
    return Error(file.error());
  }
  Quarantine(key, layout.generation, problem);
  return false;
}

ReaderImpl::ReaderImpl(StoreImpl* store, std::string key, const leveldb::Snapshot* snapshot,
                       std::string record)
    : store_(store),
      snapshot_(snapshot),
      record_(std::move(record)),
      parsed_(*blob::ParseEntryRecord(record_)) {  // Views into our own copy.
  info_.key = std::move(key);
  info_.size = parsed_.layout.size;
  info_.checksum = parsed_.layout.checksum;
  whole_ = XXH3_createState();
  XXH3_128bits_reset(whole_);
  if (!parsed_.layout.is_inline()) {
    if (!parsed_.layout.in_blob_file) {
      leveldb::ReadOptions ro;
      ro.snapshot = snapshot_;
      ro.fill_cache = false;  // A streamed multi-MiB artifact would only evict hotter blocks.
      chunks_.reset(store_->db()->NewIterator(ro));
    }
    chunk_hash_ = XXH3_createState();
  }
}

ReaderImpl::~ReaderImpl() {
  chunks_.reset();  // Before the snapshot it reads from.
  if (snapshot_) store_->db()->ReleaseSnapshot(snapshot_);
  XXH3_freeState(chunk_hash_);
  XXH3_freeState(whole_);
}

namespace {

// Feeds `bytes` to the hash states a slice at a time, so that the second pass reads the slice
// from cache rather than memory. With `dest`, each slice is appended there and hashed from the
// copy, and the per-chunk hash is skipped (`chunk_hash` is null): a whole Get hands nothing out
// before the whole checksum has matched, so that one check covers every byte, and the copy plus
// one cache-hot hash is a single trip through memory.
void HashSlices(std::string_view bytes, XXH3_state_t* chunk_hash, XXH3_state_t* whole,
                std::string* dest) {
  constexpr size_t kSlice = 128u << 10;
  for (size_t off = 0; off < bytes.size(); off += kSlice) {
    const size_t n = std::min(kSlice, bytes.size() - off);
    const char* slice = bytes.data() + off;
    if (dest != nullptr) {
      dest->append(slice, n);
      slice = dest->data() + dest->size() - n;
    }
    if (chunk_hash != nullptr) XXH3_64bits_update(chunk_hash, slice, n);
    XXH3_128bits_update(whole, slice, n);
  }
}

}  // namespace

Result<std::span<const char>> ReaderImpl::NextInto(std::string* dest) {
  if (done_) return std::span<const char>();
  const blob::EntryLayout& layout = parsed_.layout;
  if (layout.is_inline()) {
    done_ = true;
    if (ToHash(XXH3_128bits(parsed_.bytes.data(), parsed_.bytes.size())) != layout.checksum) {
      store_->Quarantine(info_.key, layout.generation, "checksum mismatch");
      return Error(DataLoss("artifact " + info_.key + " failed its checksum and was quarantined"));
    }
    store_->RecordHit(info_.key);
    if (dest != nullptr) dest->append(parsed_.bytes);
    return std::span<const char>(parsed_.bytes.data(), parsed_.bytes.size());
  }
  if (next_chunk_ == layout.chunk_count) {
    done_ = true;
    if (ToHash(XXH3_128bits_digest(whole_)) != layout.checksum) {
      store_->Quarantine(info_.key, layout.generation, "checksum mismatch");
      return Error(DataLoss("artifact " + info_.key + " failed its checksum and was quarantined"));
    }
    store_->RecordHit(info_.key);
    return std::span<const char>();
  }
  const uint32_t index = next_chunk_++;
  if (layout.in_blob_file) return NextFromBlobFile(index, dest);
  expected_chunk_key_ = blob::ChunkKey(info_.key, layout.generation, index);
  // Chunk keys sort in index order, so after the first Seek each chunk is the next record.
  if (index == 0) {
    chunks_->Seek(expected_chunk_key_);
  } else {
    chunks_->Next();
    if (chunks_->Valid() && chunks_->key() != leveldb::Slice(expected_chunk_key_)) {
      chunks_->Seek(expected_chunk_key_);  // Something sorted in between: look it up instead.
    }
  }
  std::string problem;
  std::string_view chunk;
  if (!chunks_->status().ok()) {
    done_ = true;
    return Error(FromLevelDb(chunks_->status(), "cannot read " + info_.key));
  }
  if (!chunks_->Valid() || chunks_->key() != leveldb::Slice(expected_chunk_key_)) {
    problem = "chunk " + std::to_string(index) + " is missing";
  } else {
    chunk = std::string_view(chunks_->value().data(), chunks_->value().size());
    if (chunk.size() != layout.ChunkSize(index)) {
      problem = "chunk " + std::to_string(index) + " has the wrong size";
    } else {
      if (dest != nullptr) {
        HashSlices(chunk, nullptr, whole_, dest);  // Checked whole, at the end.
      } else {
        XXH3_64bits_reset(chunk_hash_);
        HashSlices(chunk, chunk_hash_, whole_, nullptr);
        if (XXH3_64bits_digest(chunk_hash_) != parsed_.ChunkHash(index)) {
          problem = "chunk " + std::to_string(index) + " failed its checksum";
        }
      }
    }
  }
  if (!problem.empty()) {
    done_ = true;
    store_->Quarantine(info_.key, layout.generation, problem);
    return Error(DataLoss("artifact " + info_.key + ": " + problem + "; quarantined"));
  }
  return std::span<const char>(chunk.data(), chunk.size());
}

Result<std::span<const char>> ReaderImpl::NextFromBlobFile(uint32_t index, std::string* dest) {
  const blob::EntryLayout& layout = parsed_.layout;
  const uint64_t length = layout.ChunkSize(index);
  const uint64_t offset = static_cast<uint64_t>(layout.chunk_bytes) * index;
  char* into;
  if (dest != nullptr) {
    dest->resize(dest->size() + length);
    into = dest->data() + dest->size() - length;
  } else {
    chunk_buffer_.resize(length);
    into = chunk_buffer_.data();
  }
  if (Status s = file_->ReadAt(offset, length, into); !s.ok()) {
    done_ = true;
    if (s.code() != StatusCode::kDataLoss) return Error(s);
    store_->Quarantine(info_.key, layout.generation, "its blob file is short");
    return Error(DataLoss("artifact " + info_.key + ": its blob file is short; quarantined"));
  }
  const std::string_view chunk(into, length);
  if (dest != nullptr) {
    // Checked whole, at the end, before the caller may use any of it.
    XXH3_128bits_update(whole_, chunk.data(), chunk.size());
    return std::span<const char>(into, length);
  }
  XXH3_64bits_reset(chunk_hash_);
  HashSlices(chunk, chunk_hash_, whole_, nullptr);
  if (XXH3_64bits_digest(chunk_hash_) != parsed_.ChunkHash(index)) {
    done_ = true;
    const std::string problem = "chunk " + std::to_string(index) + " failed its checksum";
    store_->Quarantine(info_.key, layout.generation, problem);
    return Error(DataLoss("artifact " + info_.key + ": " + problem + "; quarantined"));
  }
  return std::span<const char>(into, length);
}

Result<bool> StoreImpl::Contains(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  std::string value;
  leveldb::Status ls = db_->Get(leveldb::ReadOptions(), blob::IndexKey(key), &value);
  if (ls.IsNotFound()) return false;
  if (!ls.ok()) return Error(FromLevelDb(ls, "cannot read " + std::string(key)));
  return true;
}

Result<std::optional<EntryInfo>> StoreImpl::Info(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  std::lock_guard<std::mutex> lock(catalog_mu_);
  return catalog_->Find(key);
}

void StoreImpl::Quarantine(const std::string& key, uint64_t generation, const std::string& reason) {
  quarantined_.fetch_add(1, std::memory_order_relaxed);
  options_.log("quarantined " + key + ": " + reason);
  if (options_.read_only) return;  // Reported and never served, but the store is not ours to fix.
  std::lock_guard<std::mutex> key_lock(KeyLock(key));
  std::string record;
  if (db_->Get(leveldb::ReadOptions(), blob::EntryKey(key), &record).ok()) {
    auto parsed = blob::ParseEntryRecord(record);
    // A new put may have replaced the bad entry since it was read: leave that one alone.
    if (parsed && generation != 0 && parsed->layout.generation != generation) return;
  }
  auto erased = EraseLocked(key, /*sync=*/false);
  if (!erased) {
    options_.log("cannot remove quarantined " + key + ": " + erased.error().message());
    return;
  }
  std::lock_guard<std::mutex> lock(catalog_mu_);
  Status s = catalog_->Quarantine(key, erased->value_or(0), NowMs(), reason);
  if (!s.ok()) options_.log("cannot record quarantine of " + key + ": " + s.message());
}

// ---------------------------------------------------------------------------------------------
// Writes

Status StoreImpl::CheckSpace(uint64_t incoming) const {
  struct statvfs fs {};
  if (::statvfs(dir_.c_str(), &fs) != 0) return Status::Ok();  // Let the write itself tell.
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < incoming + options_.min_free_bytes) {
    return ResourceExhausted("no space left on device for " + std::to_string(incoming) +
                             " bytes in " + dir_.string() + ": " + std::to_string(free_bytes) +
                             " bytes free, " + std::to_string(options_.min_free_bytes) +
                             " kept in reserve");
  }
  return Status::Ok();
}

Result<PutOutcome> StoreImpl::CommitPut(const std::string& key, leveldb::WriteBatch& batch,
                                        const blob::IndexRecord& index,
                                        const std::function<void()>& abandon) {
  std::unique_lock<std::mutex> key_lock(KeyLock(key));
  std::string existing;
  leveldb::Status ls = db_->Get(leveldb::ReadOptions(), blob::IndexKey(key), &existing);
  if (ls.ok()) {
    key_lock.unlock();
    abandon();
    return PutOutcome::kAlreadyPresent;
  }
  if (!ls.IsNotFound()) {
    key_lock.unlock();
    abandon();
    return Error(FromLevelDb(ls, "cannot read " + key));
  }
  batch.Put(blob::IndexKey(key), blob::EncodeIndexRecord(index));
  leveldb::WriteOptions wo;
  wo.sync = options_.sync_puts;
  const auto start = std::chrono::steady_clock::now();
  ls = db_->Write(wo, &batch);
  if (TraceEnabled()) {
    Trace("store", "store-commit %lld ms: %s (%llu bytes)%s",
          static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - start)
                                     .count()),
          key.c_str(), static_cast<unsigned long long>(index.size), ls.ok() ? "" : ", failed");
  }
  if (!ls.ok()) {
    key_lock.unlock();
    abandon();
    return Error(FromLevelDb(ls, "cannot store " + key));
  }
  EntryInfo e;
  e.key = key;
  e.size = index.size;
  e.checksum = index.checksum;
  e.artifact = index.artifact;
  e.created_ms = index.created_ms;
  e.last_access_ms = index.created_ms;
  Status s;
  {
    std::lock_guard<std::mutex> lock(catalog_mu_);
    s = catalog_->Insert(e);
  }
  if (!s.ok()) {
    // Without its row the entry could never be evicted: take the bytes back out. (Should this
    // fail too, the next open re-catalogues the entry from its index record.)
    leveldb::WriteBatch undo;
    undo.Delete(blob::EntryKey(key));
    undo.Delete(blob::IndexKey(key));
    ls = db_->Write(leveldb::WriteOptions(), &undo);
    if (!ls.ok()) options_.log("cannot undo put of " + key + ": " + ls.ToString());
    key_lock.unlock();
    abandon();
    return Error(s);
  }
  key_lock.unlock();
  entries_.fetch_add(1);
  bytes_.fetch_add(index.size);
  puts_.fetch_add(1, std::memory_order_relaxed);
  MaybeEvict(key);
  return PutOutcome::kStored;
}

Result<PutOutcome> StoreImpl::Put(std::string_view key, std::string_view bytes,
                                  const ArtifactInfo& info) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  HLOCACHE_RETURN_IF_ERROR(CheckWritable());
  HLOCACHE_RETURN_IF_ERROR(CheckSize(bytes.size()));
  if (bytes.size() > options_.chunk_bytes) {
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactWriter> writer, StartPut(key, info));
    HLOCACHE_RETURN_IF_ERROR(writer->Append(bytes));
    return writer->Commit();
  }
  HLOCACHE_RETURN_IF_ERROR(CheckSpace(bytes.size()));
  // Checking first keeps a repeated put of a present key from copying its bytes.
  HLOCACHE_ASSIGN_OR_RETURN(bool present, Contains(key));
  if (present) return PutOutcome::kAlreadyPresent;

  blob::IndexRecord index;
  index.size = bytes.size();
  index.generation = NewGeneration();
  index.checksum = ToHash(XXH3_128bits(bytes.data(), bytes.size()));
  index.created_ms = NowMs();
  index.artifact = info;
  blob::EntryLayout layout;
  layout.size = bytes.size();
  layout.generation = index.generation;
  layout.checksum = index.checksum;
  layout.chunk_bytes = options_.chunk_bytes;
  layout.chunk_count = 1;
  std::string record;
  record.reserve(bytes.size() + blob::kTrailerBytes);
  record.append(bytes.data(), bytes.size());
  blob::AppendEntryTrailer(layout, {}, record);
  leveldb::WriteBatch batch;
  const std::string k(key);
  batch.Put(blob::EntryKey(k), record);
  return CommitPut(k, batch, index, [] {});
}

Result<std::unique_ptr<ArtifactWriter>> StoreImpl::StartPut(std::string_view key,
                                                            const ArtifactInfo& info) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  HLOCACHE_RETURN_IF_ERROR(CheckWritable());
  return std::unique_ptr<ArtifactWriter>(
      new WriterImpl(this, std::string(key), info, NewGeneration()));
}

WriterImpl::WriterImpl(StoreImpl* store, std::string key, ArtifactInfo info, uint64_t generation)
    : store_(store), key_(std::move(key)), info_(std::move(info)), generation_(generation) {
  whole_ = XXH3_createState();
  XXH3_128bits_reset(whole_);
}

WriterImpl::~WriterImpl() {
  if (!finished_) Discard();
  XXH3_freeState(whole_);
}

void WriterImpl::Discard() {
  finished_ = true;
  if (!file_) return;  // Nothing reached the disk.
  file_->Remove();
  file_.reset();
  store_->BlobFileDone(key_, generation_);
}

Status WriterImpl::Append(std::string_view bytes) {
  if (finished_) return FailedPrecondition("put of " + key_ + " already finished");
  if (!failed_.ok()) return failed_;
  const uint32_t chunk = store_->options().chunk_bytes;
  if (Status s = store_->CheckSize(size_ + bytes.size()); !s.ok()) return failed_ = s;
  size_ += bytes.size();
  XXH3_128bits_update(whole_, bytes.data(), bytes.size());
  while (!bytes.empty()) {
    // A full chunk is written only once more bytes arrive, so an artifact of exactly one chunk
    // stays inline.
    if (buffer_.size() == chunk) {
      if (Status s = FlushChunk(); !s.ok()) return failed_ = s;
    }
    if (buffer_.capacity() < chunk) buffer_.reserve(std::min<uint64_t>(chunk, size_));
    const size_t take = std::min<size_t>(chunk - buffer_.size(), bytes.size());
    buffer_.append(bytes.data(), take);
    bytes.remove_prefix(take);
  }
  return Status::Ok();
}

// Appends the buffered chunk to the blob file, creating it with the first chunk.
Status WriterImpl::FlushChunk() {
  HLOCACHE_RETURN_STATUS_IF_ERROR(store_->CheckSpace(buffer_.size()));
  if (!file_) {
    auto created = store_->CreateBlobFile(key_, generation_);
    if (!created) return created.error();
    file_ = std::move(*created);
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = file_->Append(buffer_);
  if (TraceEnabled()) {
    Trace("store", "store-write %lld ms: chunk %zu of %s (%zu bytes)%s",
          static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - start)
                                     .count()),
          chunk_hashes_.size(), key_.c_str(), buffer_.size(), s.ok() ? "" : ", failed");
  }
  HLOCACHE_RETURN_STATUS_IF_ERROR(s);
  chunk_hashes_.push_back(XXH3_64bits(buffer_.data(), buffer_.size()));
  buffer_.clear();
  return Status::Ok();
}

Result<PutOutcome> WriterImpl::Commit() {
  if (finished_) return Error(FailedPrecondition("put of " + key_ + " already finished"));
  if (!failed_.ok()) {
    Discard();
    return Error(failed_);
  }
  const bool chunked = !chunk_hashes_.empty();
  if (Status s = store_->CheckSpace(buffer_.size()); !s.ok()) {
    Discard();
    return Error(s);
  }
  blob::IndexRecord index;
  index.size = size_;
  index.generation = generation_;
  index.checksum = ToHash(XXH3_128bits_digest(whole_));
  index.created_ms = NowMs();
  index.artifact = info_;
  blob::EntryLayout layout;
  layout.size = size_;
  layout.generation = generation_;
  layout.checksum = index.checksum;
  layout.chunk_bytes = store_->options().chunk_bytes;
  std::string record;
  if (chunked) {
    // The last chunk goes to the file too, and the file is made durable before the record
    // that names it: a crash in between leaves a file no record names, which the next open
    // removes.
    Status s = FlushChunk();
    if (s.ok() && store_->options().sync_puts) s = file_->Sync();
    if (!s.ok()) {
      Discard();
      return Error(s);
    }
    layout.chunk_count = static_cast<uint32_t>(chunk_hashes_.size());
    layout.in_blob_file = true;
  } else {
    layout.chunk_count = 1;
    record = std::move(buffer_);
  }
  buffer_ = std::string();
  blob::AppendEntryTrailer(
      layout, chunked ? std::span<const uint64_t>(chunk_hashes_) : std::span<const uint64_t>(),
      record);
  leveldb::WriteBatch batch;
  batch.Put(blob::EntryKey(key_), record);
  finished_ = true;
  auto outcome = store_->CommitPut(key_, batch, index, [this] {
    finished_ = false;
    Discard();
  });
  if (outcome && file_) {
    // Named by the entry record now (or removed by Discard): no longer a put in progress.
    file_.reset();
    store_->BlobFileDone(key_, generation_);
  }
  return outcome;
}

Result<std::optional<uint64_t>> StoreImpl::EraseLocked(const std::string& key, bool sync) {
  std::string record, index_value;
  leveldb::Status ls = db_->Get(leveldb::ReadOptions(), blob::EntryKey(key), &record);
  if (!ls.ok() && !ls.IsNotFound()) return Error(FromLevelDb(ls, "cannot read " + key));
  const bool has_entry = ls.ok();
  ls = db_->Get(leveldb::ReadOptions(), blob::IndexKey(key), &index_value);
  if (!ls.ok() && !ls.IsNotFound()) return Error(FromLevelDb(ls, "cannot read " + key));
  const bool has_index = ls.ok();
  if (!has_entry && !has_index) return std::optional<uint64_t>();
  leveldb::WriteBatch batch;
  batch.Delete(blob::EntryKey(key));
  batch.Delete(blob::IndexKey(key));
  uint64_t size = 0;
  std::optional<uint64_t> blob_generation;
  if (has_entry) {
    if (auto parsed = blob::ParseEntryRecord(record)) {
      size = parsed->layout.size;
      if (parsed->layout.in_blob_file) {
        blob_generation = parsed->layout.generation;
      } else if (!parsed->layout.is_inline()) {
        for (uint32_t i = 0; i < parsed->layout.chunk_count; ++i) {
          batch.Delete(blob::ChunkKey(key, parsed->layout.generation, i));
        }
      }
    }
    // An unreadable record leaves its chunks or blob file (generation unknown) to the orphan
    // sweeps of VerifyAll and the next open.
  }
  if (has_index) {
    if (auto index = blob::ParseIndexRecord(index_value)) size = index->size;
  }
  leveldb::WriteOptions wo;
  wo.sync = sync;
  ls = db_->Write(wo, &batch);
  if (!ls.ok()) return Error(FromLevelDb(ls, "cannot erase " + key));
  if (blob_generation) {
    // After the records: a crash in between leaves a file no record names, never a record
    // without its file. Readers that have it open keep reading it.
    const std::filesystem::path path = BlobPath(key, *blob_generation);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      options_.log("cannot remove " + path.string() +
                   " (the next open will): " + std::strerror(errno));
    }
  }
  {
    std::lock_guard<std::mutex> lock(catalog_mu_);
    HLOCACHE_RETURN_IF_ERROR(catalog_->Delete(key));
  }
  if (has_index) {
    entries_.fetch_sub(1);
    bytes_.fetch_sub(std::min(size, bytes_.load()));
  }
  return std::optional<uint64_t>(size);
}

Result<bool> StoreImpl::Erase(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  HLOCACHE_RETURN_IF_ERROR(CheckWritable());
  const std::string k(key);
  std::lock_guard<std::mutex> key_lock(KeyLock(k));
  HLOCACHE_ASSIGN_OR_RETURN(std::optional<uint64_t> erased, EraseLocked(k, options_.sync_puts));
  return erased.has_value();
}

// ---------------------------------------------------------------------------------------------
// Eviction

void StoreImpl::MaybeEvict(std::string_view just_stored) {
  if (options_.max_bytes == 0) return;
  const auto high =
      static_cast<uint64_t>(static_cast<double>(options_.max_bytes) * options_.high_water);
  if (bytes_.load() <= high) return;
  const auto low =
      static_cast<uint64_t>(static_cast<double>(options_.max_bytes) * options_.low_water);
  auto evicted = EvictToKeeping(low, just_stored);
  if (!evicted) options_.log("eviction failed: " + evicted.error().message());
}

Status StoreImpl::Compact() {
  HLOCACHE_RETURN_IF_ERROR(CheckWritable());
  db_->CompactRange(nullptr, nullptr);
  return Status::Ok();
}

Result<uint64_t> StoreImpl::EvictTo(uint64_t target_bytes) {
  HLOCACHE_RETURN_IF_ERROR(CheckWritable());
  return EvictToKeeping(target_bytes, {});
}

Result<uint64_t> StoreImpl::EvictToKeeping(uint64_t target_bytes, std::string_view keep) {
  // One evictor at a time; a put that finds eviction under way leaves it to finish.
  std::unique_lock<std::mutex> evicting(evict_mu_, std::try_to_lock);
  if (!evicting.owns_lock()) return uint64_t{0};
  // Recent hits must count before choosing what is least recently used.
  HLOCACHE_RETURN_IF_ERROR(Flush());
  uint64_t evicted = 0, freed = 0;
  while (bytes_.load() > target_bytes) {
    std::vector<std::pair<std::string, uint64_t>> oldest;
    {
      std::lock_guard<std::mutex> lock(catalog_mu_);
      HLOCACHE_ASSIGN_OR_RETURN(oldest, catalog_->Oldest(64));
    }
    bool progressed = false;
    for (const auto& [key, size] : oldest) {
      if (bytes_.load() <= target_bytes) break;
      if (key == keep) continue;
      std::lock_guard<std::mutex> key_lock(KeyLock(key));
      HLOCACHE_ASSIGN_OR_RETURN(std::optional<uint64_t> erased, EraseLocked(key, false));
      if (erased) {
        ++evicted;
        freed += *erased;
        progressed = true;
      }
    }
    if (!progressed) break;
  }
  evictions_.fetch_add(evicted);
  if (evicted) {
    options_.log("evicted " + std::to_string(evicted) + " least recently used entries (" +
                 std::to_string(freed) + " bytes) to stay under " +
                 std::to_string(options_.max_bytes) + " bytes");
  }
  return evicted;
}

// ---------------------------------------------------------------------------------------------
// Listing, statistics, verification

Result<std::vector<EntryInfo>> StoreImpl::List(const ListFilter& filter) {
  std::lock_guard<std::mutex> lock(catalog_mu_);
  return catalog_->List(filter);
}

Result<StoreStats> StoreImpl::Stats() {
  StoreStats s;
  s.entries = entries_.load();
  s.bytes = bytes_.load();
  s.max_bytes = options_.max_bytes;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.puts = puts_.load();
  s.evictions = evictions_.load();
  s.quarantined = quarantined_.load();
  return s;
}

Result<VerifyReport> StoreImpl::VerifyAll() {
  VerifyReport report;
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(catalog_mu_);
    HLOCACHE_ASSIGN_OR_RETURN(keys, catalog_->AllKeys());
  }
  for (const std::string& key : keys) {
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<ArtifactReader> reader, OpenReader(key));
    ++report.checked;
    if (!reader) {
      // Gone since listing, or an unreadable record the reader quarantined.
      continue;
    }
    while (true) {
      auto chunk = reader->Next();
      if (!chunk) {
        if (chunk.error().code() != StatusCode::kDataLoss) return Error(chunk.error());
        report.corrupt.push_back(key);
        break;
      }
      if (chunk->empty()) break;
      report.bytes += chunk->size();
    }
  }
  if (options_.read_only) return report;
  // Orphan chunks: a generation that is neither the key's live entry nor a put in progress.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  std::string current_key;
  uint64_t live_generation = 0;
  bool pending = false;
  uint64_t current_generation = ~0ull;
  leveldb::WriteBatch orphans;
  for (it->Seek(std::string(1, blob::kChunkTag));
       it->Valid() && it->key().size() > 0 && it->key()[0] == blob::kChunkTag; it->Next()) {
    std::string_view key;
    uint64_t generation = 0;
    const std::string record_key = it->key().ToString();
    if (!blob::ParseGenerationKey(record_key, key, generation)) continue;
    if (key != current_key || generation != current_generation) {
      current_key = std::string(key);
      current_generation = generation;
      live_generation = 0;
      std::string record, unused;
      if (db_->Get(leveldb::ReadOptions(), blob::EntryKey(key), &record).ok()) {
        if (auto parsed = blob::ParseEntryRecord(record))
          live_generation = parsed->layout.generation;
      }
      pending = db_->Get(leveldb::ReadOptions(), blob::PendingKey(key, generation), &unused).ok();
    }
    if (generation != live_generation && !pending) {
      orphans.Delete(record_key);
      ++report.orphan_chunks_removed;
    }
  }
  if (report.orphan_chunks_removed) {
    leveldb::Status ls = db_->Write(leveldb::WriteOptions(), &orphans);
    if (!ls.ok()) return Error(FromLevelDb(ls, "cannot remove orphan chunks"));
  }
  HLOCACHE_ASSIGN_OR_RETURN(const uint64_t orphan_files, SweepOrphanBlobFiles());
  report.orphan_chunks_removed += orphan_files;
  return report;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::filesystem::path& dir, StoreOptions options) {
  if (options.chunk_bytes == 0) return Error(InvalidArgument("chunk_bytes must be positive"));
  if (options.low_water > options.high_water || options.low_water < 0) {
    return Error(InvalidArgument("low_water must be between 0 and high_water"));
  }
  auto store = std::make_unique<StoreImpl>(dir, std::move(options));
  HLOCACHE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace hlocache::cache
