// Blob files: the bytes of a chunked artifact (one larger than the store's chunk size), one
// plain file each, DIR/large/KEY.GENERATION, its chunks back to back. The entry record in
// LevelDB names the generation and holds each chunk's XXH3-64, so a blob file is only ever
// read through that record, and a file no record names is garbage.
//
// Why not LevelDB: an LSM tree writes every byte again at each level it compacts through, and
// holds writers back with multi-second stops when compaction falls behind. For multi-MiB
// chunks that is several times the disk traffic and, on a slow or busy disk, a put that stops
// taking bytes for longer than a client waits. A blob file is written once.
//
// Durability: BlobFileWriter starts write-back of each chunk as it is appended and, when
// paced, waits for the one before, so no more than two chunks are ever dirty in the page
// cache: a put proceeds at the disk's speed in steps of one chunk, and Sync() at commit has
// at most two chunks left to write. Sync() also syncs the directory, so the file's name is as
// durable as its bytes.
//
// Errors: kResourceExhausted when the disk is full (ENOSPC, EDQUOT), kPermissionDenied,
// kNotFound (BlobFileReader on a missing file), kIoError for anything else.
//
// Thread safety: a writer or reader belongs to one thread at a time; distinct objects are
// independent.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache::cache {

// "KEY.GENERATION", the generation as 16 lowercase hex digits.
std::string BlobFileName(std::string_view key, uint64_t generation);
// The inverse; false for any name BlobFileName did not make.
bool ParseBlobFileName(std::string_view name, std::string& key, uint64_t& generation);

class BlobFileWriter {
 public:
  // Creates `path` (it must not exist). `paced`: keep at most two chunks' worth of unwritten
  // bytes (see above); off for stores that do not sync their puts.
  static Result<std::unique_ptr<BlobFileWriter>> Create(const std::filesystem::path& path,
                                                        bool paced);
  ~BlobFileWriter();  // Closes the file; never removes it (Remove does).
  BlobFileWriter(const BlobFileWriter&) = delete;
  BlobFileWriter& operator=(const BlobFileWriter&) = delete;

  // Appends one chunk.
  Status Append(std::string_view bytes);
  // Makes everything appended durable, the file's directory entry included.
  Status Sync();
  // Closes and unlinks the file (a put that will not commit). Best effort.
  void Remove();

  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  BlobFileWriter(int fd, std::filesystem::path path, bool paced)
      : fd_(fd), path_(std::move(path)), paced_(paced) {}

  int fd_;
  std::filesystem::path path_;
  bool paced_;
  uint64_t size_ = 0;
  uint64_t previous_offset_ = 0, previous_length_ = 0;  // The chunk before the last.
};

class BlobFileReader {
 public:
  // kNotFound when the file is missing.
  static Result<std::unique_ptr<BlobFileReader>> Open(const std::filesystem::path& path);
  ~BlobFileReader();
  BlobFileReader(const BlobFileReader&) = delete;
  BlobFileReader& operator=(const BlobFileReader&) = delete;

  uint64_t size() const { return size_; }
  // Reads exactly `length` bytes at `offset` into `out`; kDataLoss when the file ends first.
  Status ReadAt(uint64_t offset, uint64_t length, char* out) const;

 private:
  BlobFileReader(int fd, uint64_t size, std::filesystem::path path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_;
  uint64_t size_;
  std::filesystem::path path_;
};

// fsync of a directory, so that names created or removed in it are durable.
Status SyncDirectory(const std::filesystem::path& dir);

}  // namespace hlocache::cache
