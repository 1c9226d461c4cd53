// The store's private LevelDB layout: record keys and the encoding of entry and index records.
//
// Keys (K is a well-formed cache key, 35 bytes; G a put's generation, I a chunk index; both
// big-endian so a prefix scan visits chunks in order):
//   'e' K        entry record: the bytes themselves when they fit in one chunk, then a trailer
//                (size, generation, XXH3-128, chunk layout). Read by every get.
//   'i' K        index record: size, checksum and the catalog's fields, small; enough to rebuild
//                the catalog row, and what Contains reads.
//   'd' K G I    chunk I of a chunked artifact written by put generation G (entries of format
//                1; stores written since keep chunks in blob files, cache/blob_file.h).
//   'p' K G      a format-1 chunked put in progress: its chunks are garbage if the process dies
//                first.
//   's:clean'    written at a clean close; its absence at open means a full reconciliation.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cache/key.h"
#include "cache/store.h"
#include "common/status.h"

namespace hlocache::cache::blob {

inline constexpr char kEntryTag = 'e';
inline constexpr char kIndexTag = 'i';
inline constexpr char kChunkTag = 'd';
inline constexpr char kPendingTag = 'p';
inline constexpr std::string_view kCleanShutdownKey = "s:clean";

std::string EntryKey(std::string_view key);
std::string IndexKey(std::string_view key);
std::string ChunkPrefix(std::string_view key, uint64_t generation);
std::string ChunkKey(std::string_view key, uint64_t generation, uint32_t index);
std::string PendingKey(std::string_view key, uint64_t generation);
// Splits a 'd' or 'p' record key into cache key and generation.
bool ParseGenerationKey(std::string_view record_key, std::string_view& key, uint64_t& generation);

// The trailer of an entry record. Inline entries (chunk_count == 1) hold their bytes before it;
// chunked ones hold one XXH3-64 per chunk. The chunks of a chunked entry are in the blob file
// large/KEY.GENERATION (entry format 2) or, in stores written before blob files, in 'd'
// records (format 1).
struct EntryLayout {
  uint64_t size = 0;
  uint64_t generation = 0;
  Hash128 checksum;
  uint32_t chunk_bytes = 0;
  uint32_t chunk_count = 1;
  bool in_blob_file = false;
  bool is_inline() const { return chunk_count == 1; }
  uint64_t ChunkSize(uint32_t index) const;
};

inline constexpr size_t kTrailerBytes = 48;

// Appends the trailer (and, for chunked entries, the chunk hashes) to `record`, which holds the
// inline bytes or nothing.
void AppendEntryTrailer(const EntryLayout& layout, std::span<const uint64_t> chunk_hashes,
                        std::string& record);

// A decoded entry record; `bytes` (inline) and `chunk_hashes` point into the record.
struct EntryRecord {
  EntryLayout layout;
  std::string_view bytes;
  std::string_view chunk_hashes;  // chunk_count little-endian uint64s.
  uint64_t ChunkHash(uint32_t index) const;
};
// Fails (kDataLoss) when the record is not one this version wrote or is inconsistent.
Result<EntryRecord> ParseEntryRecord(std::string_view record);

struct IndexRecord {
  uint64_t size = 0;
  uint64_t generation = 0;
  Hash128 checksum;
  int64_t created_ms = 0;
  ArtifactInfo artifact;
};
std::string EncodeIndexRecord(const IndexRecord& record);
Result<IndexRecord> ParseIndexRecord(std::string_view record);

}  // namespace hlocache::cache::blob
