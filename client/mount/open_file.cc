#include "client/mount/open_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hlocache::mount {
namespace {

int PreadErrno(int fd, char* buf, size_t size, off_t offset) {
  while (true) {
    const ssize_t n = ::pread(fd, buf, size, offset);
    if (n >= 0) return static_cast<int>(n);
    if (errno != EINTR) return -errno;
  }
}

}  // namespace

Result<std::unique_ptr<ReadFile>> ReadFile::Open(
    Opener opener, uint64_t payload_offset, uint64_t payload_size,
    const std::function<Status(std::string_view)>& check_first_chunk) {
  std::unique_ptr<ReadFile> file(new ReadFile(std::move(opener), payload_offset, payload_size));
  HLOCACHE_ASSIGN_OR_RETURN(file->reader_, file->opener_());
  if (!file->reader_) return std::unique_ptr<ReadFile>();
  if (file->reader_->info().size != payload_offset + payload_size + 16) {
    return Error(DataLoss("the artifact's size does not match its name's"));
  }
  HLOCACHE_ASSIGN_OR_RETURN(file->chunk_, file->reader_->Next());
  HLOCACHE_RETURN_IF_ERROR(
      check_first_chunk(std::string_view(file->chunk_.data(), file->chunk_.size())));
  return file;
}

int ReadFile::Seek(uint64_t at) {
  if (at < chunk_start_ || !reader_) {
    // Backwards: read from the start again.
    auto reopened = opener_();
    if (!reopened || !*reopened) return -EIO;
    reader_ = std::move(*reopened);
    chunk_ = {};
    chunk_start_ = 0;
  }
  while (at >= chunk_start_ + chunk_.size()) {
    chunk_start_ += chunk_.size();
    auto next = reader_->Next();
    if (!next || next->empty()) {
      // A chunk failed its check (the store quarantined the entry) or the bytes ended early.
      reader_.reset();
      chunk_ = {};
      chunk_start_ = 0;
      return -EIO;
    }
    chunk_ = *next;
  }
  return 0;
}

int ReadFile::Read(char* buf, size_t size, off_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  if (offset < 0) return -EINVAL;
  const auto from = static_cast<uint64_t>(offset);
  if (from >= payload_size_) return 0;
  uint64_t at = payload_offset_ + from;
  const uint64_t end = payload_offset_ + std::min<uint64_t>(payload_size_, from + size);
  size_t copied = 0;
  while (at < end) {
    if (const int err = Seek(at); err != 0) return err;
    const uint64_t n = std::min<uint64_t>(end, chunk_start_ + chunk_.size()) - at;
    std::memcpy(buf + copied, chunk_.data() + (at - chunk_start_), n);
    copied += n;
    at += n;
  }
  return static_cast<int>(copied);
}

WriteFile::~WriteFile() {
  ::close(fd_);
  ::unlink(spool_path_.c_str());
}

int WriteFile::Read(char* buf, size_t size, off_t offset) {
  return PreadErrno(fd_, buf, size, offset);
}

LocalFile::~LocalFile() { ::close(fd_); }

int LocalFile::Read(char* buf, size_t size, off_t offset) {
  return PreadErrno(fd_, buf, size, offset);
}

}  // namespace hlocache::mount
