// The store's reads: Get, readers that verify each chunk, and quarantine of bad bytes.
#include "cache/store_impl.h"

namespace hlocache::cache {
namespace store_internal {

// ---------------------------------------------------------------------------------------------
// Reads

Result<std::optional<std::string>> StoreImpl::Get(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  std::string record;
  char entry_key[64];  // The tag and the key, without a heap allocation.
  entry_key[0] = blob::kEntryTag;
  key.copy(entry_key + 1, key.size());
  HLOCACHE_ASSIGN_OR_RETURN(
      const bool found,
      ReadEntryRecord(std::string_view(entry_key, key.size() + 1), nullptr, record));
  if (!found) return std::optional<std::string>();
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
  const std::string entry_key = blob::EntryKey(key);
  // Only a chunked entry is read from a snapshot: its chunks, and its record again. An inline
  // record is all there is, and an open blob file is its own snapshot (an erase unlinks the
  // name; the bytes stay readable through the descriptor). Taking and releasing one each lock
  // the database's one mutex, which every thread serving a hit contends for: a hit takes none.
  std::string record;
  HLOCACHE_ASSIGN_OR_RETURN(bool found, ReadEntryRecord(entry_key, nullptr, record));
  if (!found) return std::unique_ptr<ReaderImpl>();
  auto parsed = blob::ParseEntryRecord(record);
  const leveldb::Snapshot* snapshot = nullptr;
  if (parsed && !parsed->layout.is_inline() && !parsed->layout.in_blob_file) {
    snapshot = db_->GetSnapshot();
    auto again = ReadEntryRecord(entry_key, snapshot, record);
    if (!again || !*again) {
      db_->ReleaseSnapshot(snapshot);
      if (!again) return Error(again.error());
      return std::unique_ptr<ReaderImpl>();  // Erased since the first read.
    }
    parsed = blob::ParseEntryRecord(record);
    if (!parsed || parsed->layout.is_inline() || parsed->layout.in_blob_file) {
      // Replaced since by an entry of another layout, or unreadable.
      db_->ReleaseSnapshot(snapshot);
      snapshot = nullptr;
    }
  }
  if (!parsed) {
    Quarantine(std::string(key), 0, parsed.error().message());
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::unique_ptr<ReaderImpl>();
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

Result<bool> StoreImpl::ReadEntryRecord(std::string_view entry_key,
                                        const leveldb::Snapshot* snapshot, std::string& record) {
  leveldb::ReadOptions ro;
  ro.snapshot = snapshot;
  const leveldb::Status ls =
      db_->Get(ro, leveldb::Slice(entry_key.data(), entry_key.size()), &record);
  if (ls.ok()) return true;
  if (!ls.IsNotFound()) {
    return Error(FromLevelDb(ls, "cannot read " + std::string(entry_key.substr(1))));
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return false;
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

Result<std::optional<Hash128>> StoreImpl::Touch(std::string_view key) {
  HLOCACHE_RETURN_IF_ERROR(CheckKey(key));
  std::string value;
  leveldb::Status ls = db_->Get(leveldb::ReadOptions(), blob::IndexKey(key), &value);
  if (ls.IsNotFound()) return std::optional<Hash128>();
  if (!ls.ok()) return Error(FromLevelDb(ls, "cannot read " + std::string(key)));
  HLOCACHE_ASSIGN_OR_RETURN(const blob::IndexRecord index, blob::ParseIndexRecord(value));
  RecordHit(key);
  return std::optional<Hash128>(index.checksum);
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

}  // namespace store_internal

}  // namespace hlocache::cache
