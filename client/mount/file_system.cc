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

namespace hlocache::mount {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr size_t kCopyBytes = size_t{4} << 20;

// The errno for a store or server error.
int ErrnoOf(const Status& s) {
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

int Errno() { return -errno; }

// mkdir -p of a directory under the state directory.
int MakeDirectories(const fs::path& dir) {
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
  void Remember(const std::string& path, const Found& found, Clock::duration for_how_long);
  void Forget(const std::string& path);  // Its content or existence changed here.
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
  std::set<std::string> hidden_;  // Shared names unlinked here.
  std::unordered_multimap<std::string, std::weak_ptr<WriteFile>> writing_;
  std::map<uint64_t, std::shared_ptr<OpenFile>> handles_;
  uint64_t next_handle_ = 1;
  uint64_t next_spool_ = 0;
  FileSystemStats stats_;
  SingleFlight<int> fetches_;
};

// ---------------------------------------------------------------------------------------------
// Names and attributes

void FileSystemImpl::Remember(const std::string& path, const Found& found,
                              Clock::duration for_how_long) {
  constexpr size_t kMostRemembered = 1 << 16;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  if (known_.size() >= kMostRemembered) {
    // Misses of names asked once (a framework probing keys) would otherwise pile up.
    std::erase_if(known_, [now](const auto& entry) { return entry.second.until <= now; });
    if (known_.size() >= kMostRemembered) known_.clear();
  }
  known_[path] = Remembered{found, now + for_how_long};
}

void FileSystemImpl::Forget(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    known_.erase(path);
    // A name now known here makes its directories known too.
    for (std::string p = Parent(path); !p.empty(); p = Parent(p)) {
      auto it = known_.find(p);
      if (it != known_.end() && it->second.found.kind == Found::Kind::kNone) known_.erase(it);
    }
  }
  if (options_.invalidate) options_.invalidate(path);
}

Found FileSystemImpl::Lookup(const std::string& path) {
  Found found;
  if (path.empty()) {
    found.kind = Found::Kind::kDirectory;
    return found;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hidden_.count(path)) return found;
    auto it = known_.find(path);
    if (it != known_.end() && Clock::now() < it->second.until) return it->second.found;
  }
  const std::string key = Key(path);
  constexpr auto kLong = std::chrono::hours(24);
  // The local store: a committed or fetched file, or a directory of such files.
  if (auto info = store_->Info(key); info && *info) {
    const uint64_t overhead = Overhead(key, path);
    if ((*info)->size >= overhead) {
      found = Found{Found::Kind::kFile, (*info)->size - overhead, (*info)->created_ms};
      Remember(path, found, kLong);
      return found;
    }
  }
  struct stat st {};
  if (::stat(LocalPath(path).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    found.kind = Found::Kind::kDirectory;
    return found;  // mkdir'ed here: asked of the disk each time, so rmdir needs no bookkeeping.
  }
  const std::string below = path + "/";
  if (auto local = server::ListStoreFiles(*store_, options_.file_namespace, below, 1);
      local && !local->empty()) {
    found.kind = Found::Kind::kDirectory;
    Remember(path, found, options_.positive_ttl);
    return found;
  }
  // The fleet's server: a file another host wrote, or a directory of them.
  if (upstream_) {
    if (auto size = upstream_->Head(key); size && *size && **size >= Overhead(key, path)) {
      found = Found{Found::Kind::kFile, **size - Overhead(key, path), started_ms_};
      Remember(path, found, options_.positive_ttl);
      return found;
    }
    if (auto remote = upstream_->ListFiles(options_.file_namespace, below, 1);
        remote && !remote->empty()) {
      found.kind = Found::Kind::kDirectory;
      Remember(path, found, options_.positive_ttl);
      return found;
    }
  }
  Count(&FileSystemStats::misses);
  Remember(path, found, options_.negative_ttl);
  return found;
}

void FileSystemImpl::Fill(struct stat* st, const Found& found) const {
  *st = {};
  const bool dir = found.kind == Found::Kind::kDirectory;
  const mode_t perm = options_.read_only ? (dir ? 0555 : 0444) : (dir ? 0755 : 0644);
  st->st_mode = (dir ? S_IFDIR : S_IFREG) | perm;
  st->st_nlink = dir ? 2 : 1;
  st->st_uid = ::geteuid();
  st->st_gid = ::getegid();
  st->st_size = dir ? 4096 : static_cast<off_t>(found.size);
  st->st_blksize = 4096;
  st->st_blocks = (st->st_size + 511) / 512;
  const int64_t ms = found.mtime_ms != 0 ? found.mtime_ms : started_ms_;
  st->st_mtim.tv_sec = ms / 1000;
  st->st_mtim.tv_nsec = (ms % 1000) * 1000000;
  st->st_atim = st->st_mtim;
  st->st_ctim = st->st_mtim;
}

int FileSystemImpl::GetAttr(const char* fuse_path, struct stat* st, uint64_t fh) {
  if (fh != 0) {
    auto file = Handle(fh);
    if (!file) return -EBADF;
    switch (file->kind()) {
      case OpenFile::Kind::kLocal:
        return ::fstat(static_cast<LocalFile&>(*file).fd(), st) == 0 ? 0 : Errno();
      case OpenFile::Kind::kWrite: {
        struct stat spool {};
        if (::fstat(static_cast<WriteFile&>(*file).fd(), &spool) != 0) return Errno();
        Fill(st, Found{Found::Kind::kFile, static_cast<uint64_t>(spool.st_size), 0});
        st->st_mtim = spool.st_mtim;
        return 0;
      }
      case OpenFile::Kind::kRead:
        Fill(st, Found{Found::Kind::kFile, static_cast<ReadFile&>(*file).size(), 0});
        return 0;
    }
  }
  const std::string path = Relative(fuse_path);
  if (IsLocal(path)) return ::lstat(LocalPath(path).c_str(), st) == 0 ? 0 : Errno();
  if (!path.empty()) {
    if (const int err = NameError(path); err != 0) return -err;
  }
  // A file being written here is not there yet, by name: its writer sees it through its
  // handle (as the kernel does right after a create), every other caller sees nothing.
  const Found found = Lookup(path);
  if (found.kind == Found::Kind::kNone) return -ENOENT;
  Fill(st, found);
  return 0;
}

int FileSystemImpl::Children(const std::string& path, std::map<std::string, Found>* children) {
  // mkdir'ed directories and host-local names, from the state directory.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(LocalPath(path), ec)) {
    Found f;
    f.kind = e.is_directory(ec) ? Found::Kind::kDirectory : Found::Kind::kFile;
    if (f.kind == Found::Kind::kFile) f.size = e.file_size(ec);
    (*children)[e.path().filename().string()] = f;
  }
  if (IsLocal(path)) return 0;
  const std::string prefix = path.empty() ? std::string() : path + "/";
  auto add = [&](std::vector<server::FileEntry> entries, Clock::duration remember_for) {
    for (server::FileEntry& e : entries) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (hidden_.count(e.path)) continue;
      }
      const std::string rest = e.path.substr(prefix.size());
      const size_t slash = rest.find('/');
      if (slash == std::string::npos) {
        const Found f{Found::Kind::kFile, e.size, 0};
        children->emplace(rest, f);
        Remember(e.path, f, remember_for);
      } else {
        Found dir;
        dir.kind = Found::Kind::kDirectory;
        children->emplace(rest.substr(0, slash), dir);
      }
    }
  };
  if (auto local = server::ListStoreFiles(*store_, options_.file_namespace, prefix)) {
    add(std::move(*local), std::chrono::hours(24));
  }
  if (upstream_) {
    if (auto remote = upstream_->ListFiles(options_.file_namespace, prefix, 0)) {
      add(std::move(*remote), options_.positive_ttl);
    }
  }
  return 0;
}

int FileSystemImpl::ReadDir(const char* fuse_path, std::vector<DirEntry>* entries) {
  const std::string path = Relative(fuse_path);
  if (!IsLocal(path)) {
    const Found found = Lookup(path);
    if (found.kind == Found::Kind::kNone) return -ENOENT;
    if (found.kind == Found::Kind::kFile) return -ENOTDIR;
  } else if (!fs::is_directory(LocalPath(path))) {
    return -ENOENT;
  }
  std::map<std::string, Found> children;
  if (const int err = Children(path, &children); err != 0) return err;
  Found dir;
  dir.kind = Found::Kind::kDirectory;
  for (const char* dot : {".", ".."}) {
    DirEntry e;
    e.name = dot;
    Fill(&e.attributes, dir);
    entries->push_back(std::move(e));
  }
  for (const auto& [name, found] : children) {
    DirEntry e;
    e.name = name;
    Fill(&e.attributes, found);
    entries->push_back(std::move(e));
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Reading

int FileSystemImpl::FetchIfNeeded(const std::string& path, const std::string& key) {
  auto present = store_->Contains(key);
  if (present && *present) return 0;
  if (!upstream_) return -ENOENT;
  // One fetch for every reader of this name at once.
  return fetches_.Do(key, [&] { return FetchNow(path, key); });
}

int FileSystemImpl::FetchNow(const std::string& path, const std::string& key) {
  auto fetched = upstream_->Fetch(key);
  if (!fetched) {
    Count(&FileSystemStats::fetch_errors);
    std::fprintf(stderr, "hlocache: mount: cannot fetch %s: %s\n", path.c_str(),
                 fetched.error().message().c_str());
    return -EIO;
  }
  if (!*fetched) return -ENOENT;
  Count(&FileSystemStats::fetches);
  Forget(path);  // Now in the local store, with its real size.
  return 0;
}

Result<std::unique_ptr<ReadFile>> FileSystemImpl::OpenRead(const std::string& path) {
  const std::string key = Key(path);
  const uint64_t overhead = Overhead(key, path);
  auto info = store_->Info(key);
  if (!info) return Error(info.error());
  if (!*info || (*info)->size < overhead) return std::unique_ptr<ReadFile>();
  cache::Store* store = store_.get();
  const std::string file_namespace = options_.file_namespace;
  auto check = [&](std::string_view first) -> Status {
    auto header = compiler::PeekArtifactHeader(first);
    if (!header) return DataLoss(header.error().message());
    if (Status s = compiler::CheckFileArtifactHeader(*header, key); !s.ok()) {
      return DataLoss(s.message());
    }
    if (header->file_namespace != file_namespace || header->file_path != path) {
      return DataLoss("the artifact under this name's key is " + header->file_namespace + ":" +
                      header->file_path);
    }
    return Status::Ok();
  };
  auto opened = ReadFile::Open([store, key] { return store->OpenReader(key); }, overhead - 16,
                               (*info)->size - overhead, check);
  if (!opened && opened.error().code() == StatusCode::kDataLoss) {
    // Not this name's file (a forged or foreign artifact under its key): never served.
    std::fprintf(stderr, "hlocache: mount: dropped %s: %s\n", path.c_str(),
                 opened.error().message().c_str());
    (void)store_->Erase(key);
    Forget(path);
  }
  return opened;
}

int FileSystemImpl::Open(const char* fuse_path, int flags, uint64_t* fh) {
  const std::string path = Relative(fuse_path);
  const int access = flags & O_ACCMODE;
  const bool writes = access != O_RDONLY || (flags & O_TRUNC);
  if (writes && options_.read_only) return -EROFS;
  if (IsLocal(path)) {
    const int fd = ::open(LocalPath(path).c_str(), (flags & ~O_CREAT) | O_CLOEXEC);
    if (fd < 0) return Errno();
    *fh = AddHandle(std::make_shared<LocalFile>(fd));
    return 0;
  }
  if (const int err = NameError(path); err != 0) return -err;
  const std::string key = Key(path);
  if (writes) {
    std::shared_ptr<WriteFile> file;
    if (const int err = NewSpool(path, &file); err != 0) return err;
    if (!(flags & O_TRUNC)) {
      // Rewriting in place starts from the current content.
      if (FetchIfNeeded(path, key) == 0) {
        auto reader = OpenRead(path);
        if (reader && *reader) {
          std::string buffer(kCopyBytes, '\0');
          for (off_t at = 0;;) {
            const int n = (*reader)->Read(buffer.data(), buffer.size(), at);
            if (n < 0) return n;
            if (n == 0) break;
            if (::pwrite(file->fd(), buffer.data(), static_cast<size_t>(n), at) != n) {
              return Errno();
            }
            at += n;
          }
        }
      }
    } else {
      file->dirty = true;
    }
    *fh = AddHandle(file);
    return 0;
  }
  if (Lookup(path).kind != Found::Kind::kFile) return -ENOENT;
  if (const int err = FetchIfNeeded(path, key); err != 0) return err;
  auto reader = OpenRead(path);
  if (!reader) return -ErrnoOf(reader.error());
  if (!*reader) return -ENOENT;
  Count(&FileSystemStats::hits);
  *fh = AddHandle(std::shared_ptr<OpenFile>(std::move(*reader)));
  return 0;
}

int FileSystemImpl::Read(uint64_t fh, char* buf, size_t size, off_t offset) {
  auto file = Handle(fh);
  if (!file) return -EBADF;
  return file->Read(buf, size, offset);
}

// ---------------------------------------------------------------------------------------------
// Writing

int FileSystemImpl::NewSpool(const std::string& path, std::shared_ptr<WriteFile>* out) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = next_spool_++;
  }
  const std::string spool = (spool_dir_ / std::to_string(n)).string();
  const int fd = ::open(spool.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno();
  *out = std::make_shared<WriteFile>(path, fd, spool);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.emplace(path, *out);
  return 0;
}

int FileSystemImpl::Create(const char* fuse_path, int flags, mode_t mode, uint64_t* fh) {
  if (options_.read_only) return -EROFS;
  const std::string path = Relative(fuse_path);
  if (IsLocal(path)) {
    if (const int err = MakeDirectories(LocalPath(Parent(path))); err != 0) return err;
    const int fd = ::open(LocalPath(path).c_str(), flags | O_CREAT | O_CLOEXEC, mode);
    if (fd < 0) return Errno();
    *fh = AddHandle(std::make_shared<LocalFile>(fd));
    return 0;
  }
  if (const int err = NameError(path); err != 0) return -err;
  std::shared_ptr<WriteFile> file;
  if (const int err = NewSpool(path, &file); err != 0) return err;
  file->dirty = true;  // An empty file is a file too.
  *fh = AddHandle(file);
  return 0;
}

int FileSystemImpl::Write(uint64_t fh, const char* buf, size_t size, off_t offset) {
  auto file = Handle(fh);
  if (!file) return -EBADF;
  if (file->kind() == OpenFile::Kind::kRead) return -EBADF;
  int fd;
  if (file->kind() == OpenFile::Kind::kWrite) {
    auto& w = static_cast<WriteFile&>(*file);
    std::lock_guard<std::mutex> lock(w.mu());
    if (const int err = CheckCap(static_cast<uint64_t>(offset) + size, w.path()); err != 0) {
      w.failed = err;  // Never committed: a file is whole or absent.
      if (::ftruncate(w.fd(), 0) != 0) return err;
      return err;
    }
    w.dirty = true;
    w.written = true;
    fd = w.fd();
  } else {
    fd = static_cast<LocalFile&>(*file).fd();
  }
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, buf + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = Errno();
      if (file->kind() == OpenFile::Kind::kWrite) {
        auto& w = static_cast<WriteFile&>(*file);
        std::lock_guard<std::mutex> lock(w.mu());
        w.failed = err;  // A disk that filled up: nothing of this file is committed.
        if (::ftruncate(fd, 0) != 0) return err;
      }
      return err;
    }
    done += static_cast<size_t>(n);
  }
  return static_cast<int>(size);
}

int FileSystemImpl::Commit(const std::string& path, int fd, uint64_t size, bool* stored) {
  const std::string key = Key(path);
  *stored = false;
  if (const int err = CheckCap(size, path); err != 0) return err;
  compiler::FileArtifactEncoder encoder(key, options_.file_namespace, path, size);
  cache::ArtifactInfo info;
  info.target = std::string(compiler::kFileTarget);
  info.compiler_id = options_.file_namespace;
  info.graph_name = path;
  auto fail = [&](const Status& s) {
    Count(&FileSystemStats::write_errors);
    std::fprintf(stderr, "hlocache: mount: %s is not stored: %s\n", path.c_str(),
                 s.message().c_str());
    return -ErrnoOf(s);
  };
  auto writer = store_->StartPut(key, info);
  if (!writer) return fail(writer.error());
  if (Status s = (*writer)->Append(encoder.Prefix()); !s.ok()) return fail(s);
  std::string buffer(std::min<uint64_t>(kCopyBytes, std::max<uint64_t>(size, 1)), '\0');
  for (uint64_t at = 0; at < size;) {
    const ssize_t n = ::pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), size - at),
                              static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fail(IoError("cannot read back what was written: " +
                          std::string(n < 0 ? std::strerror(errno) : "it ended early")));
    const std::string_view piece(buffer.data(), static_cast<size_t>(n));
    encoder.Hash(piece);
    if (Status s = (*writer)->Append(piece); !s.ok()) return fail(s);
    at += static_cast<uint64_t>(n);
  }
  if (Status s = (*writer)->Append(encoder.Trailer()); !s.ok()) return fail(s);
  auto outcome = (*writer)->Commit();
  if (!outcome) return fail(outcome.error());
  {
    std::lock_guard<std::mutex> lock(mu_);
    hidden_.erase(path);
    ++stats_.writes;
  }
  Forget(path);
  // First write wins: a name already stored here keeps its content.
  *stored = *outcome == cache::PutOutcome::kStored;
  return 0;
}

int FileSystemImpl::CommitHandle(WriteFile& w) {
  struct stat st {};
  if (::fstat(w.fd(), &st) != 0) return Errno();
  if (w.ours) {
    // This handle stored the name before and wrote more since (its file was shared with a
    // dup or a child that closed first): its own earlier content gives way.
    (void)store_->Erase(Key(w.path()));
    w.ours = false;
  }
  bool stored = false;
  if (const int err = Commit(w.path(), w.fd(), static_cast<uint64_t>(st.st_size), &stored);
      err != 0) {
    w.failed = err;
    // Its bytes will never be stored: give their space back now, not at release (which the
    // kernel sends after close has returned).
    if (::ftruncate(w.fd(), 0) != 0) return err;
    return err;
  }
  w.ours = stored;
  w.dirty = false;
  return 0;
}

bool DyingFromASignal(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  // Fields 9 (flags) and 52 (exit_code), counted from 1 with the state as field 3.
  if (f.size() < 50) return false;
  constexpr unsigned long kExiting = 0x4;  // PF_EXITING
  const unsigned long flags = std::strtoul(f[6].c_str(), nullptr, 10);
  const long exit_code = std::strtol(f[49].c_str(), nullptr, 10);
  return (flags & kExiting) != 0 && (exit_code & 0x7f) != 0;
}

int FileSystemImpl::Flush(uint64_t fh, pid_t pid) {
  auto file = Handle(fh);
  if (!file) return -EBADF;
  if (file->kind() != OpenFile::Kind::kWrite) return 0;
  auto& w = static_cast<WriteFile&>(*file);
  std::lock_guard<std::mutex> lock(w.mu());
  if (w.failed != 0) return w.failed;
  if (DyingFromASignal(pid)) {
    // The writer was killed (its files are being closed for it): what it wrote may be any
    // part of the file, and is never stored.
    w.failed = -EIO;
    w.abandoned = true;
    return 0;
  }
  // Nothing written yet: the close of a descriptor the file was opened on before being dup'ed
  // (a shell's redirection, dd). The file is stored when it is written and closed, or at the
  // release of an empty one.
  if (!w.dirty || !w.written) return 0;
  return CommitHandle(w);
}

int FileSystemImpl::Release(uint64_t fh) {
  std::shared_ptr<OpenFile> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return -EBADF;
    file = std::move(it->second);
    handles_.erase(it);
    if (file->kind() == OpenFile::Kind::kWrite) {
      auto range = writing_.equal_range(static_cast<WriteFile&>(*file).path());
      for (auto i = range.first; i != range.second; ++i) {
        if (i->second.lock() == file) {
          writing_.erase(i);
          break;
        }
      }
    }
  }
  if (file->kind() != OpenFile::Kind::kWrite) return 0;
  auto& w = static_cast<WriteFile&>(*file);
  std::lock_guard<std::mutex> lock(w.mu());
  // The last descriptor is closed: what this handle stored is the file, and only now goes to
  // the fleet, so that no host is ever sent an earlier state of it.
  if (w.failed == 0 && w.dirty && CommitHandle(w) != 0) return 0;  // Said on stderr.
  if (w.failed == 0 && w.ours && upstream_) upstream_->QueueUpload(Key(w.path()));
  return 0;
}

int FileSystemImpl::Truncate(const char* fuse_path, off_t size, uint64_t fh) {
  if (options_.read_only) return -EROFS;
  if (size < 0) return -EINVAL;
  std::shared_ptr<OpenFile> file = fh != 0 ? Handle(fh) : nullptr;
  const std::string path = fh != 0 ? std::string() : Relative(fuse_path);
  if (!file && IsLocal(path)) {
    return ::truncate(LocalPath(path).c_str(), size) == 0 ? 0 : Errno();
  }
  if (!file) {
    // A file being written here may be truncated by name; a committed one never changes.
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto range = writing_.equal_range(path);
      for (auto it = range.first; it != range.second && !file; ++it) file = it->second.lock();
    }
    if (!file) return Lookup(path).kind == Found::Kind::kNone ? -ENOENT : -EPERM;
  }
  if (file->kind() == OpenFile::Kind::kLocal) {
    return ::ftruncate(static_cast<LocalFile&>(*file).fd(), size) == 0 ? 0 : Errno();
  }
  if (file->kind() != OpenFile::Kind::kWrite) return -EBADF;
  auto& w = static_cast<WriteFile&>(*file);
  std::lock_guard<std::mutex> lock(w.mu());
  if (const int err = CheckCap(static_cast<uint64_t>(size), w.path()); err != 0) {
    w.failed = err;
    return err;
  }
  if (::ftruncate(w.fd(), size) != 0) return Errno();
  w.dirty = true;
  w.written = true;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Names

int FileSystemImpl::Unlink(const char* fuse_path) {
  if (options_.read_only) return -EROFS;
  const std::string path = Relative(fuse_path);
  if (IsLocal(path)) return ::unlink(LocalPath(path).c_str()) == 0 ? 0 : Errno();
  const Found found = Lookup(path);
  if (found.kind == Found::Kind::kNone) return -ENOENT;
  if (found.kind == Found::Kind::kDirectory) return -EISDIR;
  // This host's copy and view only: the fleet keeps the file.
  if (auto erased = store_->Erase(Key(path)); !erased) {
    std::fprintf(stderr, "hlocache: mount: cannot remove %s here: %s\n", path.c_str(),
                 erased.error().message().c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    hidden_.insert(path);
  }
  Forget(path);
  return 0;
}

int FileSystemImpl::Mkdir(const char* fuse_path, mode_t mode) {
  if (options_.read_only) return -EROFS;
  const std::string path = Relative(fuse_path);
  if (!IsLocal(path)) {
    if (const int err = NameError(path); err != 0) return -err;
    if (Lookup(path).kind != Found::Kind::kNone) return -EEXIST;
  }
  if (const int err = MakeDirectories(LocalPath(Parent(path))); err != 0) return err;
  if (::mkdir(LocalPath(path).c_str(), mode | 0700) != 0) return Errno();
  Forget(path);
  return 0;
}

int FileSystemImpl::Rmdir(const char* fuse_path) {
  if (options_.read_only) return -EROFS;
  const std::string path = Relative(fuse_path);
  if (path.empty()) return -EBUSY;
  if (!IsLocal(path)) {
    const Found found = Lookup(path);
    if (found.kind == Found::Kind::kNone) return -ENOENT;
    if (found.kind == Found::Kind::kFile) return -ENOTDIR;
    std::map<std::string, Found> children;
    if (const int err = Children(path, &children); err != 0) return err;
    if (!children.empty()) return -ENOTEMPTY;
    // A directory with no names left in it exists only here, if at all.
    if (::rmdir(LocalPath(path).c_str()) != 0 && errno != ENOENT) return Errno();
    Forget(path);
    return 0;
  }
  return ::rmdir(LocalPath(path).c_str()) == 0 ? 0 : Errno();
}

int FileSystemImpl::Rename(const char* from_fuse, const char* to_fuse, unsigned int flags) {
  if (options_.read_only) return -EROFS;
  if (flags & ~static_cast<unsigned int>(RENAME_NOREPLACE)) return -EINVAL;
  const std::string from = Relative(from_fuse), to = Relative(to_fuse);
  if (!IsLocal(from)) {
    // A committed name keeps its content and its place: renaming it would be a copy to the
    // fleet and a delete it cannot make.
    return -EXDEV;
  }
  if (IsLocal(to)) {
    if ((flags & RENAME_NOREPLACE) && ::access(LocalPath(to).c_str(), F_OK) == 0) return -EEXIST;
    if (const int err = MakeDirectories(LocalPath(Parent(to))); err != 0) return err;
    return ::rename(LocalPath(from).c_str(), LocalPath(to).c_str()) == 0 ? 0 : Errno();
  }
  // Write-then-rename: the temporary file is committed under its final name.
  if (const int err = NameError(to); err != 0) return -err;
  const Found existing = Lookup(to);
  if (existing.kind == Found::Kind::kDirectory) return -EISDIR;
  if (existing.kind == Found::Kind::kFile && (flags & RENAME_NOREPLACE)) return -EEXIST;
  const int fd = ::open(LocalPath(from).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno();
  struct stat st {};
  int err = ::fstat(fd, &st) == 0 ? 0 : Errno();
  if (err == 0 && S_ISDIR(st.st_mode)) err = -EXDEV;
  bool stored = false;
  if (err == 0) err = Commit(to, fd, static_cast<uint64_t>(st.st_size), &stored);
  ::close(fd);
  if (err != 0) return err;
  if (stored && upstream_) upstream_->QueueUpload(Key(to));
  if (::unlink(LocalPath(from).c_str()) != 0) return Errno();
  return 0;
}

int FileSystemImpl::Chmod(const char* fuse_path, mode_t mode, uint64_t fh) {
  if (options_.read_only) return -EROFS;
  if (auto file = fh != 0 ? Handle(fh) : nullptr; file && file->kind() == OpenFile::Kind::kLocal) {
    return ::fchmod(static_cast<LocalFile&>(*file).fd(), mode) == 0 ? 0 : Errno();
  }
  const std::string path = Relative(fuse_path);
  if (fh == 0 && IsLocal(path)) return ::chmod(LocalPath(path).c_str(), mode) == 0 ? 0 : Errno();
  return 0;  // Shared files have the mount's modes.
}

int FileSystemImpl::Utimens(const char* fuse_path, const struct timespec times[2], uint64_t fh) {
  if (options_.read_only) return -EROFS;
  if (auto file = fh != 0 ? Handle(fh) : nullptr; file && file->kind() == OpenFile::Kind::kLocal) {
    return ::futimens(static_cast<LocalFile&>(*file).fd(), times) == 0 ? 0 : Errno();
  }
  const std::string path = Relative(fuse_path);
  if (fh == 0 && IsLocal(path)) {
    return ::utimensat(AT_FDCWD, LocalPath(path).c_str(), times, 0) == 0 ? 0 : Errno();
  }
  return 0;  // Shared files keep the time they were stored.
}

int FileSystemImpl::StatFs(struct statvfs* st) {
  return ::statvfs(options_.state_dir.c_str(), st) == 0 ? 0 : Errno();
}

// ---------------------------------------------------------------------------------------------
// Handles and statistics

uint64_t FileSystemImpl::AddHandle(std::shared_ptr<OpenFile> file) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t fh = next_handle_++;
  handles_.emplace(fh, std::move(file));
  return fh;
}

std::shared_ptr<OpenFile> FileSystemImpl::Handle(uint64_t fh) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(fh);
  return it == handles_.end() ? nullptr : it->second;
}

std::string FileSystemImpl::StatsJson() const {
  const FileSystemStats s = stats();
  nlohmann::ordered_json j;
  j["namespace"] = options_.file_namespace;
  j["read_only"] = options_.read_only;
  j["hits"] = s.hits;
  j["fetches"] = s.fetches;
  j["misses"] = s.misses;
  j["writes"] = s.writes;
  j["write_errors"] = s.write_errors;
  j["fetch_errors"] = s.fetch_errors;
  if (upstream_) {
    const server::UpstreamStats u = upstream_->stats();
    j["server"] = upstream_->url();
    j["server_up"] = u.up;
    j["uploads"] = u.uploads;
    j["pending_uploads"] = u.pending_uploads;
  }
  if (auto store = store_->Stats()) {
    j["local_entries"] = store->entries;
    j["local_bytes"] = store->bytes;
  }
  return j.dump();
}

}  // namespace

std::vector<std::string> DefaultLocalPatterns() {
  return {"*.lock", "*.lockfile", "*-atime", "*.tmp", "tmp.pid_*"};
}

Result<std::unique_ptr<FileSystem>> FileSystem::Make(FileSystemOptions options,
                                                     std::unique_ptr<cache::Store> store,
                                                     std::unique_ptr<server::Upstream> upstream) {
  HLOCACHE_RETURN_IF_ERROR(cache::ValidateFileNamespace(options.file_namespace));
  auto fs =
      std::make_unique<FileSystemImpl>(std::move(options), std::move(store), std::move(upstream));
  HLOCACHE_RETURN_IF_ERROR(fs->Init());
  return std::unique_ptr<FileSystem>(std::move(fs));
}

}  // namespace hlocache::mount
