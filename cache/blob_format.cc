#include "cache/blob_format.h"

#include <cstring>

namespace hlocache::cache::blob {
namespace {

constexpr uint32_t kEntryMagic = 0x45434c48;  // "HLCE" little-endian.
constexpr uint32_t kEntryFormat = 1;          // Inline, or chunks in 'd' records.
constexpr uint32_t kEntryFormatBlobFile = 2;  // Chunks in a blob file.
constexpr uint32_t kIndexFormat = 1;
constexpr size_t kKeyBytes = 35;  // "v1-" + 32 hex digits.

void PutBigEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetBigEndian(std::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<uint8_t>(in[i]);
  return value;
}

template <typename T>
void PutFixed(std::string& out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));  // Little-endian on every supported host.
  out.append(buf, sizeof(T));
}

template <typename T>
T GetFixed(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string TaggedKey(char tag, std::string_view key) {
  std::string out;
  out.reserve(1 + key.size() + 12);
  out += tag;
  out += key;
  return out;
}

Status Corrupt(std::string_view what) {
  return DataLoss("stored record is corrupt: " + std::string(what));
}

}  // namespace

std::string EntryKey(std::string_view key) { return TaggedKey(kEntryTag, key); }
std::string IndexKey(std::string_view key) { return TaggedKey(kIndexTag, key); }

std::string ChunkPrefix(std::string_view key, uint64_t generation) {
  std::string out = TaggedKey(kChunkTag, key);
  PutBigEndian(out, generation, 8);
  return out;
}

std::string ChunkKey(std::string_view key, uint64_t generation, uint32_t index) {
  std::string out = ChunkPrefix(key, generation);
  PutBigEndian(out, index, 4);
  return out;
}

std::string PendingKey(std::string_view key, uint64_t generation) {
  std::string out = TaggedKey(kPendingTag, key);
  PutBigEndian(out, generation, 8);
  return out;
}

bool ParseGenerationKey(std::string_view record_key, std::string_view& key, uint64_t& generation) {
  if (record_key.size() < 1 + kKeyBytes + 8) return false;
  key = record_key.substr(1, kKeyBytes);
  generation = GetBigEndian(record_key.substr(1 + kKeyBytes), 8);
  return IsWellFormedKey(key);
}

uint64_t EntryLayout::ChunkSize(uint32_t index) const {
  if (is_inline()) return size;
  if (index + 1 < chunk_count) return chunk_bytes;
  return size - static_cast<uint64_t>(chunk_bytes) * (chunk_count - 1);
}

void AppendEntryTrailer(const EntryLayout& layout, std::span<const uint64_t> chunk_hashes,
                        std::string& record) {
  for (uint64_t h : chunk_hashes) PutFixed(record, h);
  PutFixed(record, layout.size);
  PutFixed(record, layout.generation);
  PutFixed(record, layout.checksum.high);
  PutFixed(record, layout.checksum.low);
  PutFixed(record, layout.chunk_bytes);
  PutFixed(record, layout.chunk_count);
  PutFixed(record, layout.in_blob_file ? kEntryFormatBlobFile : kEntryFormat);
  PutFixed(record, kEntryMagic);
}

uint64_t EntryRecord::ChunkHash(uint32_t index) const {
  return GetFixed<uint64_t>(chunk_hashes.data() + 8 * static_cast<size_t>(index));
}

Result<EntryRecord> ParseEntryRecord(std::string_view record) {
  if (record.size() < kTrailerBytes) return Error(Corrupt("entry record too short"));
  const char* t = record.data() + record.size() - kTrailerBytes;
  EntryRecord out;
  EntryLayout& l = out.layout;
  l.size = GetFixed<uint64_t>(t);
  l.generation = GetFixed<uint64_t>(t + 8);
  l.checksum.high = GetFixed<uint64_t>(t + 16);
  l.checksum.low = GetFixed<uint64_t>(t + 24);
  l.chunk_bytes = GetFixed<uint32_t>(t + 32);
  l.chunk_count = GetFixed<uint32_t>(t + 36);
  if (GetFixed<uint32_t>(t + 44) != kEntryMagic) return Error(Corrupt("bad entry magic"));
  const uint32_t format = GetFixed<uint32_t>(t + 40);
  if (format != kEntryFormat && format != kEntryFormatBlobFile) {
    return Error(Corrupt("unknown entry format " + std::to_string(format)));
  }
  l.in_blob_file = format == kEntryFormatBlobFile;
  const size_t body = record.size() - kTrailerBytes;
  if (l.chunk_count == 0) return Error(Corrupt("entry with no chunks"));
  if (l.in_blob_file && l.is_inline()) return Error(Corrupt("an inline entry names a blob file"));
  if (l.is_inline()) {
    if (body != l.size) return Error(Corrupt("inline entry size does not match its record"));
    out.bytes = record.substr(0, body);
    return out;
  }
  if (l.chunk_bytes == 0 || body != 8ull * l.chunk_count) {
    return Error(Corrupt("chunk table does not match its record"));
  }
  const uint64_t full = static_cast<uint64_t>(l.chunk_bytes) * (l.chunk_count - 1);
  if (l.size <= full || l.size > full + l.chunk_bytes) {
    return Error(Corrupt("chunked entry size does not match its chunk count"));
  }
  out.chunk_hashes = record.substr(0, body);
  return out;
}

std::string EncodeIndexRecord(const IndexRecord& r) {
  std::string out;
  PutFixed(out, kIndexFormat);
  PutFixed(out, r.size);
  PutFixed(out, r.generation);
  PutFixed(out, r.checksum.high);
  PutFixed(out, r.checksum.low);
  PutFixed(out, r.created_ms);
  PutFixed(out, r.artifact.compile_seconds);
  for (const std::string* s :
       {&r.artifact.target, &r.artifact.compiler_id, &r.artifact.graph_name}) {
    PutFixed(out, static_cast<uint32_t>(s->size()));
    out += *s;
  }
  return out;
}

Result<IndexRecord> ParseIndexRecord(std::string_view in) {
  constexpr size_t kFixed = 4 + 8 * 6;
  if (in.size() < kFixed) return Error(Corrupt("index record too short"));
  const char* p = in.data();
  if (GetFixed<uint32_t>(p) != kIndexFormat) return Error(Corrupt("unknown index format"));
  IndexRecord r;
  r.size = GetFixed<uint64_t>(p + 4);
  r.generation = GetFixed<uint64_t>(p + 12);
  r.checksum.high = GetFixed<uint64_t>(p + 20);
  r.checksum.low = GetFixed<uint64_t>(p + 28);
  r.created_ms = GetFixed<int64_t>(p + 36);
  r.artifact.compile_seconds = GetFixed<double>(p + 44);
  size_t pos = kFixed;
  for (std::string* s : {&r.artifact.target, &r.artifact.compiler_id, &r.artifact.graph_name}) {
    if (in.size() - pos < 4) return Error(Corrupt("index record truncated"));
    const uint32_t n = GetFixed<uint32_t>(p + pos);
    pos += 4;
    if (in.size() - pos < n) return Error(Corrupt("index record truncated"));
    s->assign(p + pos, n);
    pos += n;
  }
  if (pos != in.size()) return Error(Corrupt("index record has trailing bytes"));
  return r;
}

}  // namespace hlocache::cache::blob
