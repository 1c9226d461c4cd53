// The file system `hlocache mount` serves: a directory that is the fleet's cache, so that
// PyTorch/XLA, JAX, Triton and Inductor keep their compiled files in it unmodified.
//
// Names are of two kinds:
//   - shared names: each file is a file artifact (compiler/artifact/file_payload.h) under the
//     key of (namespace, path), kept in the local store and uploaded to the fleet's server.
//     A file becomes visible here when it is closed after being written (flush), and goes to
//     the fleet when its last descriptor is closed (release): a reader never sees part of one,
//     two writers of one name end with one whole file (the first stored; a name keeps its
//     first content), and what a killed writer leaves is never stored. Reads come from the local
//     store, fetched whole from the server first when it is not there, every chunk verified
//     before it is handed out. Directories are implicit in the names.
//   - host-local names: those with a component matching a local pattern (lock files, JAX's
//     -atime files, the temporary names of write-then-rename): plain files in the state
//     directory, with every POSIX behavior, never uploaded. Renaming one to a shared name
//     commits it under that name.
// unlink of a shared name removes it from this host's view and local store, never from the
// fleet. A read-only file system refuses every change with EROFS and serves every read.
//
// Failures never stall the caller: with the server gone, a lookup answers from the local store
// within the server's timeouts (and then at once while the server rests), a miss is ENOENT,
// and committed files wait in the upload queue until the server answers again.
//
// Methods take absolute paths as FUSE gives them ("/a/b") and return 0 or a negated errno,
// as FUSE expects. Thread safety: every method may be called from any thread at once.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "server/upstream.h"

namespace hlocache::mount {

// The host-local patterns used when none are given: lock files, JAX's access-time files, and
// the temporary names of Inductor's and Triton's write-then-rename.
std::vector<std::string> DefaultLocalPatterns();

struct FileSystemOptions {
  std::string file_namespace = "files";
  bool read_only = false;
  // Holds the host-local names (local/) and the files being written (spool/).
  std::filesystem::path state_dir;
  // fnmatch(3) patterns; a name is host-local when any of its components matches one.
  std::vector<std::string> local_patterns = DefaultLocalPatterns();
  // How long a name found nowhere is taken to be missing before the tiers are asked again.
  std::chrono::milliseconds negative_ttl{1000};
  // How long a file seen on the server (and not fetched) is taken to be there.
  std::chrono::milliseconds positive_ttl{1000};
  // Called when a name's content or existence changed here, so that the kernel's caches of it
  // are dropped; may be empty.
  std::function<void(const std::string& path)> invalidate;
};

struct DirEntry {
  std::string name;
  struct stat attributes {};
};

struct FileSystemStats {
  uint64_t hits = 0;          // Shared names opened for reading, found in the local store...
  uint64_t fetches = 0;       // ...or fetched from the server first.
  uint64_t misses = 0;        // Lookups of shared names found nowhere.
  uint64_t writes = 0;        // Files committed (written and closed, or renamed into place).
  uint64_t write_errors = 0;  // Commits that failed (disk full, over the size cap).
  uint64_t fetch_errors = 0;  // Fetches that failed (server gone, bad bytes).
};

class FileSystem {
 public:
  // `store` is the local tier; `upstream` the fleet's server, or null. Empties the state
  // directory's spool (files a killed mount was writing: never committed).
  static Result<std::unique_ptr<FileSystem>> Make(FileSystemOptions options,
                                                  std::unique_ptr<cache::Store> store,
                                                  std::unique_ptr<server::Upstream> upstream);
  virtual ~FileSystem() = default;

  // `fh` is 0 or a handle from Open or Create (then the open file's attributes).
  virtual int GetAttr(const char* path, struct stat* st, uint64_t fh) = 0;
  virtual int ReadDir(const char* path, std::vector<DirEntry>* entries) = 0;
  virtual int Open(const char* path, int flags, uint64_t* fh) = 0;
  virtual int Create(const char* path, int flags, mode_t mode, uint64_t* fh) = 0;
  // Bytes read (0 at the end), or a negated errno.
  virtual int Read(uint64_t fh, char* buf, size_t size, off_t offset) = 0;
  virtual int Write(uint64_t fh, const char* buf, size_t size, off_t offset) = 0;
  // A descriptor of the handle is closed by process `pid`: what the handle wrote is stored,
  // visible here from now on (unless `pid` is being killed: a killed writer's file is never
  // stored).
  virtual int Flush(uint64_t fh, pid_t pid) = 0;
  // The handle's last descriptor is closed: a file it stored goes to the fleet.
  virtual int Release(uint64_t fh) = 0;
  virtual int Fsync(uint64_t fh) = 0;
  virtual int Truncate(const char* path, off_t size, uint64_t fh) = 0;
  virtual int Unlink(const char* path) = 0;
  virtual int Mkdir(const char* path, mode_t mode) = 0;
  virtual int Rmdir(const char* path) = 0;
  // `flags`: 0 or RENAME_NOREPLACE (RENAME_EXCHANGE is EINVAL).
  virtual int Rename(const char* from, const char* to, unsigned int flags) = 0;
  virtual int Chmod(const char* path, mode_t mode, uint64_t fh) = 0;
  virtual int Utimens(const char* path, const struct timespec times[2], uint64_t fh) = 0;
  virtual int StatFs(struct statvfs* st) = 0;

  virtual FileSystemStats stats() const = 0;
  // The counters, the namespace and the upload queue as one JSON object.
  virtual std::string StatsJson() const = 0;
};

}  // namespace hlocache::mount
