#include "common/trace.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace hlocache {
namespace {

// The file, opened on first use; -1 when tracing is off.
int TraceFd() {
  static const int fd = [] {
    const char* path = std::getenv("HLOCACHE_TRACE_FILE");
    if (path == nullptr || *path == '\0') return -1;
    return ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }();
  return fd;
}

}  // namespace

bool TraceEnabled() { return TraceFd() >= 0; }

void Trace(const char* area, const char* format, ...) {
  const int fd = TraceFd();
  if (fd < 0) return;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  char line[1024];
  int n = std::snprintf(line, sizeof line, "%ld.%06ld pid %d %s: ", static_cast<long>(now.tv_sec),
                        now.tv_nsec / 1000, static_cast<int>(::getpid()), area);
  if (n < 0) return;
  va_list args;
  va_start(args, format);
  const int m = std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  if (m < 0) return;
  n = std::min<int>(n + m, static_cast<int>(sizeof line) - 2);
  line[n++] = '\n';
  // One write: O_APPEND makes it land whole after whatever another process wrote.
  [[maybe_unused]] const ssize_t written = ::write(fd, line, static_cast<size_t>(n));
}

}  // namespace hlocache
