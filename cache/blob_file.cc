#include "cache/blob_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/key.h"

namespace hlocache::cache {
namespace {

Status FromErrno(int err, const std::string& what) {
  const std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return ResourceExhausted(message + " (no space left on device)");
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDenied(message);
    case ENOENT:
      return NotFound(message);
    default:
      return IoError(message);
  }
}

constexpr size_t kGenerationDigits = 16;

}  // namespace

std::string BlobFileName(std::string_view key, uint64_t generation) {
  char hex[kGenerationDigits + 1];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(generation));
  std::string name(key);
  name += '.';
  name += hex;
  return name;
}

bool ParseBlobFileName(std::string_view name, std::string& key, uint64_t& generation) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || name.size() - dot - 1 != kGenerationDigits) return false;
  const std::string_view k = name.substr(0, dot);
  if (!IsWellFormedKey(k)) return false;
  uint64_t g = 0;
  for (char c : name.substr(dot + 1)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    g = (g << 4) | static_cast<uint64_t>(digit);
  }
  key.assign(k);
  generation = g;
  return true;
}

Result<std::unique_ptr<BlobFileWriter>> BlobFileWriter::Create(const std::filesystem::path& path,
                                                               bool paced) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Error(FromErrno(errno, "cannot create " + path.string()));
  return std::unique_ptr<BlobFileWriter>(new BlobFileWriter(fd, path, paced));
}

BlobFileWriter::~BlobFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status BlobFileWriter::Append(std::string_view bytes) {
  if (fd_ < 0) return FailedPrecondition(path_.string() + " is closed");
  const uint64_t offset = size_;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return FromErrno(n < 0 ? errno : ENOSPC, "cannot write " + path_.string());
    done += static_cast<size_t>(n);
  }
  size_ += bytes.size();
  if (!paced_ || bytes.empty()) return Status::Ok();
  // Start writing this chunk back now, then wait for the one before: the put moves at the
  // disk's pace a chunk at a time, instead of piling up dirty pages that the commit's sync
  // (or the kernel, all at once) would have to write while the client waits for an answer.
  if (::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes.size()),
                        SYNC_FILE_RANGE_WRITE) != 0) {
    return FromErrno(errno, "cannot write back " + path_.string());
  }
  if (previous_length_ > 0 &&
      ::sync_file_range(
          fd_, static_cast<off_t>(previous_offset_), static_cast<off_t>(previous_length_),
          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
    return FromErrno(errno, "cannot write back " + path_.string());
  }
  previous_offset_ = offset;
  previous_length_ = bytes.size();
  return Status::Ok();
}

Status BlobFileWriter::Sync() {
  if (fd_ < 0) return FailedPrecondition(path_.string() + " is closed");
  if (::fdatasync(fd_) != 0) return FromErrno(errno, "cannot sync " + path_.string());
  return SyncDirectory(path_.parent_path());
}

void BlobFileWriter::Remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

Result<std::unique_ptr<BlobFileReader>> BlobFileReader::Open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(FromErrno(errno, "cannot open " + path.string()));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error(FromErrno(err, "cannot stat " + path.string()));
  }
  // Read front to back, once: the kernel may read ahead generously.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<BlobFileReader>(
      new BlobFileReader(fd, static_cast<uint64_t>(st.st_size), path));
}

BlobFileReader::~BlobFileReader() { ::close(fd_); }

Status BlobFileReader::ReadAt(uint64_t offset, uint64_t length, char* out) const {
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FromErrno(errno, "cannot read " + path_.string());
    if (n == 0)
      return DataLoss(path_.string() + " ends before offset " + std::to_string(offset + length));
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FromErrno(errno, "cannot open " + dir.string());
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (r != 0) return FromErrno(err, "cannot sync " + dir.string());
  return Status::Ok();
}

}  // namespace hlocache::cache
