#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace hlocache {

int ReadAll(int fd, std::string& out, size_t max_bytes) {
  out.clear();
  struct stat st {};
  size_t expected = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    expected = static_cast<size_t>(st.st_size);
  }
  constexpr size_t kPiece = size_t{1} << 20;
  for (;;) {
    // One more byte than the file's size is asked for at first, and then, once that much has
    // arrived, whatever room the string has left: the end of the file is seen by a read of 0
    // bytes into that room, without a regrowth (which copied a 4 MB module once more and
    // touched 5 MB of fresh memory to read nothing). Room runs out only when the file grew.
    const size_t room = out.capacity() - out.size();
    size_t want = kPiece;
    if (out.size() < expected) {
      want = expected - out.size() + 1;
    } else if (expected > 0 && room > 0) {
      want = room;
    }
    want = std::min(want, max_bytes + 1 - std::min(out.size(), max_bytes));
    ssize_t got = 0;
    const size_t had = out.size();
    out.resize_and_overwrite(had + want, [&](char* p, size_t) {
      do {
        got = ::read(fd, p + had, want);
      } while (got < 0 && errno == EINTR);
      return had + static_cast<size_t>(std::max<ssize_t>(got, 0));
    });
    if (got < 0) return errno;
    if (out.size() > max_bytes) return EFBIG;
    if (got == 0) return 0;
  }
}

Result<std::string> ReadWholeFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(NotFound(path.string() + ": cannot be opened"));
  std::string bytes;
  const int err = ReadAll(fd, bytes, bytes.max_size() - 1);
  ::close(fd);
  if (err != 0) return Error(IoError(path.string() + ": read failed"));
  return bytes;
}

std::filesystem::path CurrentExecutable() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("hlocache") : self;
}

std::filesystem::path UserCacheFolder() {
  if (const char* xdg = ::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return std::filesystem::path(xdg) / "hlocache";
  }
  if (const char* home = ::getenv("HOME"); home != nullptr && *home == '/') {
    return std::filesystem::path(home) / ".cache" / "hlocache";
  }
  return {};
}

}  // namespace hlocache
