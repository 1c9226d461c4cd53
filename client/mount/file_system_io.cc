// The mount's file system: opening, reading and writing files, and committing what was
// written to the tiers.
#include "client/mount/file_system_impl.h"

namespace hlocache::mount {
namespace mount_internal {

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

}  // namespace mount_internal

}  // namespace hlocache::mount
