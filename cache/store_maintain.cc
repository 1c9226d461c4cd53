// The store's upkeep: eviction to the cap, compaction, listing, statistics and VerifyAll.
#include "cache/store_impl.h"

namespace hlocache::cache {
namespace store_internal {

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

}  // namespace store_internal

}  // namespace hlocache::cache
