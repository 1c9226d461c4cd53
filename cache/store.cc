// The store: opening a directory, recovery after a crash (pending puts, reconciliation of the
// catalog, orphan blob files), counters, and the background flusher.
#include "cache/store_impl.h"

namespace hlocache::cache {
namespace store_internal {

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
  HLOCACHE_RETURN_IF_ERROR(LoadCounters());

  if (!options_.read_only) {
    std::string marker;
    const bool clean =
        db_->Get(leveldb::ReadOptions(), std::string(blob::kCleanShutdownKey), &marker).ok();
    HLOCACHE_RETURN_IF_ERROR(Reconcile(/*full=*/!clean));
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
  HLOCACHE_RETURN_IF_ERROR(RemovePendingPuts(unfinished));
  if (!full) return Status::Ok();
  // Merge the sorted LevelDB index records with the sorted catalog keys: rows without bytes
  // are dropped, bytes without a row (a crash between the two commits) are catalogued again.
  std::lock_guard<std::mutex> lock(catalog_mu_);
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<std::string> rows, catalog_->AllKeys());
  uint64_t added = 0, dropped = 0;
  HLOCACHE_RETURN_IF_ERROR(catalog_->Begin());
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
  HLOCACHE_RETURN_IF_ERROR(catalog_->Commit());
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
  HLOCACHE_RETURN_IF_ERROR(catalog_->ApplyAccesses(updates));
  std::map<std::string, uint64_t> counters = CounterSnapshot();
  if (counters == saved_counters_) return Status::Ok();  // An idle store writes nothing.
  HLOCACHE_RETURN_IF_ERROR(catalog_->SaveCounters(counters));
  saved_counters_ = std::move(counters);
  return Status::Ok();
}

}  // namespace store_internal

Result<std::unique_ptr<Store>> Store::Open(const std::filesystem::path& dir, StoreOptions options) {
  if (options.chunk_bytes == 0) return Error(InvalidArgument("chunk_bytes must be positive"));
  if (options.low_water > options.high_water || options.low_water < 0) {
    return Error(InvalidArgument("low_water must be between 0 and high_water"));
  }
  auto store = std::make_unique<store_internal::StoreImpl>(dir, std::move(options));
  HLOCACHE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace hlocache::cache
