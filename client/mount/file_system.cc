// The mount's file system: what a name is (lookups in the tiers, remembered briefly),
// attributes, listings, open handles and counters.
#include "client/mount/file_system_impl.h"

namespace hlocache::mount {
namespace mount_internal {

// ---------------------------------------------------------------------------------------------
// Names and attributes

void FileSystemImpl::Remember(const std::string& path, const Found& found,
                              Clock::duration for_how_long, uint64_t changes) {
  constexpr size_t kMostRemembered = 1 << 16;
  std::lock_guard<std::mutex> lock(mu_);
  if (changes != changes_) return;  // What was found may be older than a change made since.
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
    ++changes_;
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
  uint64_t changes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes = changes_;
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
      Remember(path, found, kLong, changes);
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
    Remember(path, found, options_.positive_ttl, changes);
    return found;
  }
  // The fleet's server: a file another host wrote, or a directory of them.
  if (upstream_) {
    if (auto size = upstream_->Head(key); size && *size && **size >= Overhead(key, path)) {
      found = Found{Found::Kind::kFile, **size - Overhead(key, path), started_ms_};
      Remember(path, found, options_.positive_ttl, changes);
      return found;
    }
    if (auto remote = upstream_->ListFiles(options_.file_namespace, below, 1);
        remote && !remote->empty()) {
      found.kind = Found::Kind::kDirectory;
      Remember(path, found, options_.positive_ttl, changes);
      return found;
    }
  }
  Count(&FileSystemStats::misses);
  Remember(path, found, options_.negative_ttl, changes);
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
  const uint64_t changes = Changes();
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
        Remember(e.path, f, remember_for, changes);
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

}  // namespace mount_internal

std::vector<std::string> DefaultLocalPatterns() {
  return {"*.lock", "*.lockfile", "*-atime", "*.tmp", "tmp.pid_*"};
}

Result<std::unique_ptr<FileSystem>> FileSystem::Make(FileSystemOptions options,
                                                     std::unique_ptr<cache::Store> store,
                                                     std::unique_ptr<server::Upstream> upstream) {
  HLOCACHE_RETURN_IF_ERROR(cache::ValidateFileNamespace(options.file_namespace));
  auto fs = std::make_unique<mount_internal::FileSystemImpl>(std::move(options), std::move(store),
                                                             std::move(upstream));
  HLOCACHE_RETURN_IF_ERROR(fs->Init());
  return std::unique_ptr<FileSystem>(std::move(fs));
}

}  // namespace hlocache::mount
