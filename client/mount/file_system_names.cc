// The mount's file system: changes to names (unlink, mkdir, rmdir, rename, chmod, utimens)
// and statfs.
#include "client/mount/file_system_impl.h"

namespace hlocache::mount {
namespace mount_internal {

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

}  // namespace mount_internal

}  // namespace hlocache::mount
