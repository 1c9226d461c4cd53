// The files the mount has open: a shared file read from the local store, a shared file being
// written (its bytes in a spool file until it is committed), or a host-local file.
//
// Thread safety: each handle serializes its own calls; handles are independent.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "cache/store.h"
#include "common/status.h"

namespace hlocache::mount {

class OpenFile {
 public:
  enum class Kind { kRead, kWrite, kLocal };
  virtual ~OpenFile() = default;
  virtual Kind kind() const = 0;
  // Bytes read, or a negated errno.
  virtual int Read(char* buf, size_t size, off_t offset) = 0;
};

// A committed shared file, read a verified chunk at a time from the store. Reads going forward
// (the common case: frameworks read a file front to back) take each chunk once; a read before
// the current chunk starts the store's reader again.
class ReadFile final : public OpenFile {
 public:
  using Opener = std::function<Result<std::unique_ptr<cache::ArtifactReader>>()>;
  // Opens the artifact through `opener` and checks its first chunk: a file artifact whose
  // payload starts at `payload_offset` (kDataLoss otherwise). nullptr when the store no longer
  // has it.
  static Result<std::unique_ptr<ReadFile>> Open(
      Opener opener, uint64_t payload_offset, uint64_t payload_size,
      const std::function<Status(std::string_view)>& check_first_chunk);
  Kind kind() const override { return Kind::kRead; }
  int Read(char* buf, size_t size, off_t offset) override;
  uint64_t size() const { return payload_size_; }

 private:
  ReadFile(Opener opener, uint64_t payload_offset, uint64_t payload_size)
      : opener_(std::move(opener)), payload_offset_(payload_offset), payload_size_(payload_size) {}
  // Makes the chunk holding container offset `at` current; a negated errno on failure.
  int Seek(uint64_t at);

  std::mutex mu_;
  Opener opener_;
  const uint64_t payload_offset_, payload_size_;
  std::unique_ptr<cache::ArtifactReader> reader_;
  std::span<const char> chunk_;  // Valid until the reader's next call.
  uint64_t chunk_start_ = 0;     // Container offset of chunk_.
};

// A shared file being written: its bytes go to a spool file, committed by the file system on
// flush.
class WriteFile final : public OpenFile {
 public:
  WriteFile(std::string path, int spool_fd, std::string spool_path)
      : path_(std::move(path)), fd_(spool_fd), spool_path_(std::move(spool_path)) {}
  ~WriteFile() override;
  Kind kind() const override { return Kind::kWrite; }
  int Read(char* buf, size_t size, off_t offset) override;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  std::mutex& mu() { return mu_; }
  // Guarded by mu():
  bool dirty = false;      // Changed since it was last stored (a new file starts dirty).
  bool written = false;    // Written or truncated at all (not only created).
  bool ours = false;       // What it stored is the name's content here.
  int failed = 0;          // A write failed (negated errno): the file is never stored.
  bool abandoned = false;  // Its writer was killed before closing it.

 private:
  std::mutex mu_;
  const std::string path_;
  const int fd_;
  const std::string spool_path_;
};

// A host-local file: a plain file descriptor.
class LocalFile final : public OpenFile {
 public:
  explicit LocalFile(int fd) : fd_(fd) {}
  ~LocalFile() override;
  Kind kind() const override { return Kind::kLocal; }
  int Read(char* buf, size_t size, off_t offset) override;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

}  // namespace hlocache::mount
