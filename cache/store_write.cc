// The store's writes: whole and streamed puts, their commit, and erase.
#include "cache/store_impl.h"

namespace hlocache::cache {
namespace store_internal {

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
  HLOCACHE_RETURN_IF_ERROR(store_->CheckSpace(buffer_.size()));
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
  HLOCACHE_RETURN_IF_ERROR(s);
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

}  // namespace store_internal

}  // namespace hlocache::cache
