// Internal to the mount's file system (client/mount/file_system*.cc): the class behind
// FileSystem, shared by the files that implement it by concern (names and attributes, reading
// and writing, changes to names). The contract is client/mount/file_system.h's.
#pragma once

#include "client/mount/file_system.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cache/key.h"
#include "client/mount/names.h"
#include "client/mount/open_file.h"
#include "common/single_flight.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "server/file_listing.h"

namespace hlocache::mount::mount_internal {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

inline constexpr size_t kCopyBytes = size_t{4} << 20;

// The errno for a store or server error.
inline int ErrnoOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kResourceExhausted:
      return s.message().find("cap") != std::string::npos ? EFBIG : ENOSPC;
    case StatusCode::kPermissionDenied:
      return EACCES;
    case StatusCode::kNotFound:
      return ENOENT;
    default:
      return EIO;
  }
}

inline int Errno() { return -errno; }

// mkdir -p of a directory under the state directory.
inline int MakeDirectories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec ? -ec.value() : 0;
}

// What a name is, as far as the tiers know.
struct Found {
  enum class Kind { kNone, kFile, kDirectory } kind = Kind::kNone;
  uint64_t size = 0;
  int64_t mtime_ms = 0;
};

struct Remembered {
  Found found;
  Clock::time_point until;
};

class FileSystemImpl final : public FileSystem {
 public:
  FileSystemImpl(FileSystemOptions options, std::unique_ptr<cache::Store> store,
                 std::unique_ptr<server::Upstream> upstream)
      : options_(std::move(options)),
        local_names_(options_.local_patterns),
        store_(std::move(store)),
        upstream_(std::move(upstream)),
        local_root_(options_.state_dir / "local"),
        spool_dir_(options_.state_dir / "spool"),
        started_ms_(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()) {}

  Status Init() {
    std::error_code ec;
    fs::remove_all(spool_dir_, ec);  // What a killed mount was writing: never committed.
    for (const fs::path& dir : {local_root_, spool_dir_}) {
      fs::create_directories(dir, ec);
      if (ec) return IoError("cannot create " + dir.string() + ": " + ec.message());
    }
    return Status::Ok();
  }

  int GetAttr(const char* fuse_path, struct stat* st, uint64_t fh) override;
  int ReadDir(const char* fuse_path, std::vector<DirEntry>* entries) override;
  int Open(const char* fuse_path, int flags, uint64_t* fh) override;
  int Create(const char* fuse_path, int flags, mode_t mode, uint64_t* fh) override;
  int Read(uint64_t fh, char* buf, size_t size, off_t offset) override;
  int Write(uint64_t fh, const char* buf, size_t size, off_t offset) override;
  int Flush(uint64_t fh, pid_t pid) override;
  int Release(uint64_t fh) override;
  int Fsync(uint64_t) override { return 0; }
  int Truncate(const char* fuse_path, off_t size, uint64_t fh) override;
  int Unlink(const char* fuse_path) override;
  int Mkdir(const char* fuse_path, mode_t mode) override;
  int Rmdir(const char* fuse_path) override;
  int Rename(const char* from, const char* to, unsigned int flags) override;
  int Chmod(const char* fuse_path, mode_t mode, uint64_t fh) override;
  int Utimens(const char* fuse_path, const struct timespec times[2], uint64_t fh) override;
  int StatFs(struct statvfs* st) override;
  FileSystemStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::string StatsJson() const override;

 private:
  std::string Key(const std::string& path) const {
    return cache::ComposeFileKey(options_.file_namespace, path);
  }
  uint64_t Overhead(const std::string& key, const std::string& path) const {
    return compiler::FileArtifactOverhead(key, options_.file_namespace, path);
  }
  fs::path LocalPath(const std::string& path) const {
    return path.empty() ? local_root_ : local_root_ / path;
  }
  bool IsLocal(const std::string& path) const { return local_names_.IsLocal(path); }

  Found Lookup(const std::string& path);
  // Remembers what `path` is for a while, unless a name changed here (Forget) since `changes`
  // was read: a lookup that began before a commit would otherwise remember the miss it saw
  // before it, and hide the committed file for the negative TTL.
  void Remember(const std::string& path, const Found& found, Clock::duration for_how_long,
                uint64_t changes);
  void Forget(const std::string& path);  // Its content or existence changed here.
  uint64_t Changes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return changes_;
  }
  void Fill(struct stat* st, const Found& found) const;
  // Children of a directory: name -> what it is.
  int Children(const std::string& path, std::map<std::string, Found>* children);

  // The artifact of a shared name in the local store, fetched from the server first if needed.
  // 0, -ENOENT (nowhere) or -EIO (the server could not deliver it).
  int FetchIfNeeded(const std::string& path, const std::string& key);
  int FetchNow(const std::string& path, const std::string& key);
  Result<std::unique_ptr<ReadFile>> OpenRead(const std::string& path);
  // Stores `size` bytes of `fd` as the file `path`; `*stored` says whether they are now its
  // content (false: the name had one already).
  int Commit(const std::string& path, int fd, uint64_t size, bool* stored);
  // Stores what a write handle holds (giving its own earlier content way); records a failure
  // in the handle. Called with its lock held.
  int CommitHandle(WriteFile& w);
  int NewSpool(const std::string& path, std::shared_ptr<WriteFile>* out);
  uint64_t AddHandle(std::shared_ptr<OpenFile> file);
  std::shared_ptr<OpenFile> Handle(uint64_t fh);
  template <typename Counter>
  void Count(Counter counter) {
    std::lock_guard<std::mutex> lock(mu_);
    ++(stats_.*counter);
  }
  int CheckCap(uint64_t size, const std::string& path) const {
    const uint64_t cap = store_cap();
    if (cap == 0) return 0;
    const std::string key = Key(path);
    return size + Overhead(key, path) > cap ? -EFBIG : 0;
  }
  uint64_t store_cap() const {
    auto s = store_->Stats();
    return s ? s->max_bytes : 0;
  }

  const FileSystemOptions options_;
  const LocalNames local_names_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<server::Upstream> upstream_;
  const fs::path local_root_, spool_dir_;
  const int64_t started_ms_;

  mutable std::mutex mu_;  // Guards what follows.
  std::unordered_map<std::string, Remembered> known_;
  uint64_t changes_ = 0;          // Forget calls so far.
  std::set<std::string> hidden_;  // Shared names unlinked here.
  std::unordered_multimap<std::string, std::weak_ptr<WriteFile>> writing_;
  std::map<uint64_t, std::shared_ptr<OpenFile>> handles_;
  uint64_t next_handle_ = 1;
  uint64_t next_spool_ = 0;
  FileSystemStats stats_;
  SingleFlight<int> fetches_;
};

}  // namespace hlocache::mount::mount_internal
