// Exclusive ownership of a store directory by one process.
//
// The lock is an fcntl write lock on DIR/lock, which the kernel drops when the process dies, so
// a crash never leaves a stale lock behind. When the lock is taken, the error names the holder:
// its pid and command line (from /proc) and, if it is a server that wrote DIR/server.json, the
// address it listens on, so the user knows to go through that server.
//
// Thread safety: Acquire is safe to call from any thread; a second Acquire of the same directory
// in one process fails as it would from another process.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace hlocache::cache {

// What a server writes to DIR/server.json while it owns the directory.
struct ServerInfo {
  long pid = 0;
  std::string listen;   // "host:port" or a URL.
  std::string started;  // ISO 8601, informational.
};

class DirLock {
 public:
  // kUnavailable when another process (or this one) holds it; kPermissionDenied or kIoError
  // when DIR/lock cannot be opened.
  static Result<std::unique_ptr<DirLock>> Acquire(const std::filesystem::path& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  DirLock(int fd, std::string canonical_dir) : fd_(fd), canonical_dir_(std::move(canonical_dir)) {}
  int fd_;
  std::string canonical_dir_;
};

// DIR/server.json, written atomically (temporary file and rename); removed by RemoveServerInfo.
Status WriteServerInfo(const std::filesystem::path& dir, const ServerInfo& info);
void RemoveServerInfo(const std::filesystem::path& dir);
// Empty when absent or unreadable.
std::optional<ServerInfo> ReadServerInfo(const std::filesystem::path& dir);

}  // namespace hlocache::cache
