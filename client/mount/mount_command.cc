// The FUSE side of `hlocache mount`: libfuse's high-level API over mount::FileSystem.
#define FUSE_USE_VERSION 314
#include "client/mount/mount_command.h"

#include <fuse.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include "cache/dir_lock.h"
#include "cache/store.h"
#include "client/cache.h"
#include "client/commands.h"
#include "client/mount/file_system.h"
#include "common/byte_size.h"
#include "storage/s3_backend.h"

namespace hlocache::mount {
namespace {

namespace fs = std::filesystem;

// What the FUSE callbacks reach through fuse_get_context()->private_data.
struct Mounted {
  FileSystem* fs = nullptr;
  struct fuse* fuse = nullptr;

  // Cache invalidations, sent from a thread of their own: a notification sent from inside a
  // request handler could wait on the very request it is part of.
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::string> pending;
  bool stopping = false;
  std::thread invalidator;

  void Invalidate(const std::string& path) {
    {
      std::lock_guard<std::mutex> lock(mu);
      pending.push_back("/" + path);
    }
    changed.notify_one();
  }
  void RunInvalidator() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      changed.wait(lock, [&] { return stopping || !pending.empty(); });
      if (stopping) return;
      const std::string path = std::move(pending.front());
      pending.pop_front();
      lock.unlock();
      if (fuse != nullptr) fuse_invalidate_path(fuse, path.c_str());
      lock.lock();
    }
  }
  void StopInvalidator() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    changed.notify_all();
    if (invalidator.joinable()) invalidator.join();
  }
};

Mounted& Self() { return *static_cast<Mounted*>(fuse_get_context()->private_data); }
FileSystem& Fs() { return *Self().fs; }
uint64_t Fh(const fuse_file_info* fi) { return fi != nullptr ? fi->fh : 0; }

void* Init(fuse_conn_info* conn, fuse_config* cfg) {
  // Every path walk asks the mount, which answers from memory for names it knows: a file
  // being written stays invisible by name until it is committed, and is visible here the
  // moment it is. (The mount itself remembers a missing name for a second, so that a file
  // another host wrote appears within that.)
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 1.0;
  cfg->negative_timeout = 0;
  // Open files are handles of ours: no renaming of unlinked open files to .fuse_hidden names,
  // and no path needed to read or write them.
  cfg->hard_remove = 1;
  cfg->nullpath_ok = 1;
  cfg->use_ino = 0;
  // open(O_TRUNC) arrives as one call, not a truncate before the open: a committed file
  // cannot be truncated in place.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // Larger requests: fewer round trips through the kernel per MiB.
  conn->max_write = 1u << 20;
  conn->max_read = 1u << 20;  // As the max_read mount option says.
  conn->max_readahead = 1u << 20;
  return fuse_get_context()->private_data;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  return Fs().GetAttr(path, st, Fh(fi));
}

// With nullpath_ok, readdir is given no path: opendir keeps it in the handle.
int OpenDir(const char* path, fuse_file_info* fi) {
  fi->fh = reinterpret_cast<uint64_t>(new std::string(path != nullptr ? path : "/"));
  return 0;
}

int ReleaseDir(const char*, fuse_file_info* fi) {
  delete reinterpret_cast<std::string*>(fi->fh);
  return 0;
}

int ReadDir(const char*, void* buf, fuse_fill_dir_t filler, off_t, fuse_file_info* fi,
            fuse_readdir_flags) {
  std::vector<DirEntry> entries;
  const std::string& path = *reinterpret_cast<const std::string*>(fi->fh);
  if (const int err = Fs().ReadDir(path.c_str(), &entries); err != 0) return err;
  for (const DirEntry& e : entries) {
    if (filler(buf, e.name.c_str(), &e.attributes, 0, FUSE_FILL_DIR_PLUS) != 0) break;
  }
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  if (const int err = Fs().Open(path, fi->flags, &fi->fh); err != 0) return err;
  // A committed file never changes under its name (a name keeps its first content, and this
  // mount drops the kernel's copy when that changes here): keep the page cache across opens.
  fi->keep_cache = (fi->flags & O_ACCMODE) == O_RDONLY ? 1 : 0;
  return 0;
}

int Create(const char* path, mode_t mode, fuse_file_info* fi) {
  return Fs().Create(path, fi->flags, mode, &fi->fh);
}

int Read(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  return Fs().Read(fi->fh, buf, size, offset);
}

int Write(const char*, const char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  return Fs().Write(fi->fh, buf, size, offset);
}

int Flush(const char*, fuse_file_info* fi) { return Fs().Flush(fi->fh, fuse_get_context()->pid); }
int Release(const char*, fuse_file_info* fi) { return Fs().Release(fi->fh); }
int Fsync(const char*, int, fuse_file_info* fi) { return Fs().Fsync(fi->fh); }
int Truncate(const char* path, off_t size, fuse_file_info* fi) {
  return Fs().Truncate(path, size, Fh(fi));
}
int Unlink(const char* path) { return Fs().Unlink(path); }
int Mkdir(const char* path, mode_t mode) { return Fs().Mkdir(path, mode); }
int Rmdir(const char* path) { return Fs().Rmdir(path); }
int Rename(const char* from, const char* to, unsigned int flags) {
  return Fs().Rename(from, to, flags);
}
int Chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  return Fs().Chmod(path, mode, Fh(fi));
}
int Chown(const char*, uid_t, gid_t, fuse_file_info*) { return 0; }
int Utimens(const char* path, const struct timespec times[2], fuse_file_info* fi) {
  return Fs().Utimens(path, times, Fh(fi));
}
int StatFs(const char*, struct statvfs* st) { return Fs().StatFs(st); }
// Names are files and directories only.
int Symlink(const char*, const char*) { return -EPERM; }
int Link(const char*, const char*) { return -EPERM; }
int Mknod(const char*, mode_t, dev_t) { return -EPERM; }
int Readlink(const char*, char*, size_t) { return -EINVAL; }

int GetXattr(const char* path, const char* name, char* value, size_t size) {
  if (std::strcmp(path, "/") != 0 || std::strcmp(name, kStatsAttribute) != 0) return -ENODATA;
  const std::string json = Fs().StatsJson();
  if (size == 0) return static_cast<int>(json.size());
  if (size < json.size()) return -ERANGE;
  std::memcpy(value, json.data(), json.size());
  return static_cast<int>(json.size());
}

int ListXattr(const char* path, char* list, size_t size) {
  if (std::strcmp(path, "/") != 0) return 0;
  const size_t n = std::strlen(kStatsAttribute) + 1;
  if (size == 0) return static_cast<int>(n);
  if (size < n) return -ERANGE;
  std::memcpy(list, kStatsAttribute, n);
  return static_cast<int>(n);
}

fuse_operations Operations() {
  fuse_operations ops{};
  ops.init = Init;
  ops.getattr = GetAttr;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.open = Open;
  ops.create = Create;
  ops.read = Read;
  ops.write = Write;
  ops.flush = Flush;
  ops.release = Release;
  ops.fsync = Fsync;
  ops.truncate = Truncate;
  ops.unlink = Unlink;
  ops.mkdir = Mkdir;
  ops.rmdir = Rmdir;
  ops.rename = Rename;
  ops.chmod = Chmod;
  ops.chown = Chown;
  ops.utimens = Utimens;
  ops.statfs = StatFs;
  ops.symlink = Symlink;
  ops.link = Link;
  ops.mknod = Mknod;
  ops.readlink = Readlink;
  ops.getxattr = GetXattr;
  ops.listxattr = ListXattr;
  // No lock or flock: the kernel then keeps POSIX and flock locks itself, across the
  // processes of this host, which is what lock files need.
  return ops;
}

fs::path DefaultStateRoot() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state != '\0') {
    return fs::path(state) / "hlocache" / "mount";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".local" / "state" /
         "hlocache" / "mount";
}

// The local store of a mount does not sync each file to the disk: the frameworks write their
// cache files without fsync on any file system, and the mount's copy is a cache of what the
// fleet keeps. A mount killed (kill -9) loses nothing; after a power loss a recent file may be
// missing here, never corrupt (every read is verified).
cache::StoreOptions MountStoreOptions(uint64_t max_bytes) {
  cache::StoreOptions options;
  options.max_bytes = max_bytes;
  options.sync_puts = false;
  return options;
}

// The tiers of the spec: the local store this mount opens, and the fleet's server.
struct Tiers {
  std::unique_ptr<cache::Store> store;
  fs::path store_dir;
  std::string server;
  std::string bucket;  // s3://BUCKET[/PREFIX]: files are read from and written to it too.
  bool read_only = false;
  // What the mount reads through to and uploads to (server/upstream.h): the server, the bucket.
  std::string Upstream() const {
    return server.empty() ? bucket : bucket.empty() ? server : server + "," + bucket;
  }
};

Result<Tiers> OpenTiers(const MountSettings& settings, uint64_t max_bytes, std::ostream& err) {
  Tiers tiers;
  tiers.read_only = settings.read_only;
  if (const char* ro = std::getenv("HLOCACHE_READONLY")) {
    tiers.read_only |= std::string(ro) == "1" || std::string(ro) == "true";
  }
  std::string spec = settings.spec;
  if (spec.empty()) {
    const char* env = std::getenv("HLOCACHE");
    spec = env != nullptr ? env : "";
  }
  for (const std::string& part : client::SplitCacheSpec(spec)) {
    if (part.starts_with("http://") || part.starts_with("https://")) {
      if (tiers.server.empty()) {
        tiers.server = part;
      } else {
        err << "hlocache: mount: server " << part << " ignored: files go to " << tiers.server
            << "\n";
      }
      continue;
    }
    if (storage::IsS3Url(part)) {
      if (tiers.bucket.empty()) {
        tiers.bucket = part;
      } else {
        err << "hlocache: mount: bucket " << part << " ignored: files go to " << tiers.bucket
            << "\n";
      }
      continue;
    }
    if (part == "memory") continue;  // The kernel's page cache is this mount's memory tier.
    if (tiers.store) {
      err << "hlocache: mount: directory " << part << " ignored: the local store is "
          << tiers.store_dir.string() << "\n";
      continue;
    }
    cache::StoreOptions options = MountStoreOptions(max_bytes);
    options.read_only = tiers.read_only;
    auto store = cache::Store::Open(part, options);
    if (!store && store.error().code() == StatusCode::kPermissionDenied && !tiers.read_only) {
      options.read_only = true;  // A directory this user may only read: a read-only mount.
      store = cache::Store::Open(part, options);
      if (store) tiers.read_only = true;
    }
    if (store) {
      tiers.store = std::move(*store);
      tiers.store_dir = part;
      continue;
    }
    // Owned by a running server: files go through it, as every client's would.
    if (auto info = cache::ReadServerInfo(part);
        store.error().code() == StatusCode::kUnavailable && info && !info->listen.empty()) {
      if (tiers.server.empty()) tiers.server = info->listen;
      continue;
    }
    err << "hlocache: mount: directory " << part << " skipped: " << store.error().message() << "\n";
  }
  return tiers;
}

// A mount left behind by a mount process that was killed answers ENOTCONN: detach it so this
// one can take its place.
void DetachStaleMount(const fs::path& mountpoint) {
  struct stat st {};
  if (::stat(mountpoint.c_str(), &st) == 0 || errno != ENOTCONN) return;
  if (::umount2(mountpoint.c_str(), MNT_DETACH) == 0) return;
  const std::string command = "fusermount3 -u -z '" + mountpoint.string() + "' 2>/dev/null";
  [[maybe_unused]] const int rc = std::system(command.c_str());
}

// The kernel reads ahead 128 KiB at a time on a FUSE mount (its default for a device), which
// makes a large file a stream of 128 KiB requests. A wider window makes them 1 MiB (the
// mount's max_read): a quarter of the round trips. Needs root; without it the default stays.
// The device is read from /proc/self/mountinfo: once mounted, a stat of the mount point (a
// canonical path too) is a request to this very process, which does not serve yet; `where` is
// the canonical path taken before the mount.
void WidenReadahead(const std::string& where) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  std::string device;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == where && line.find(" - fuse.hlocache ") != std::string::npos) device = dev;
  }
  if (!device.empty()) std::ofstream("/sys/class/bdi/" + device + "/read_ahead_kb") << 1024;
}

}  // namespace

int RunMount(const MountSettings& settings, std::ostream& out, std::ostream& err) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    err << "hlocache mount: /dev/fuse is not available (" << std::strerror(errno)
        << "): FUSE 3 is needed (Debian: fuse3)\n";
    return 1;
  }
  if (Status s = cache::ValidateFileNamespace(settings.file_namespace); !s.ok()) {
    err << "hlocache mount: --namespace: " << s.message() << "\n";
    return 1;
  }
  uint64_t max_bytes = 0;
  if (!settings.max_size.empty()) {
    auto size = ParseByteSize(settings.max_size);
    if (!size) {
      err << "hlocache mount: --max-size: " << size.error().message() << "\n";
      return 1;
    }
    max_bytes = *size;
  }
  if (settings.dry_run) {
    std::string spec = settings.spec;
    if (spec.empty()) spec = std::getenv("HLOCACHE") != nullptr ? std::getenv("HLOCACHE") : "";
    out << "would mount " << settings.mountpoint.string() << " (namespace "
        << settings.file_namespace << (settings.read_only ? ", read-only" : "") << ") on '" << spec
        << "'\n";
    return 0;
  }
  DetachStaleMount(settings.mountpoint);
  std::error_code ec;
  if (!fs::is_directory(settings.mountpoint, ec)) {
    err << "hlocache mount: " << settings.mountpoint.string() << " is not a directory\n";
    return 1;
  }
  auto tiers = OpenTiers(settings, max_bytes, err);
  if (!tiers) {
    err << "hlocache mount: " << tiers.error().message() << "\n";
    return 1;
  }
  fs::path state = settings.state_dir;
  if (state.empty()) {
    state = tiers->store ? tiers->store_dir / "mount" / settings.file_namespace
                         : DefaultStateRoot() / settings.file_namespace;
  }
  fs::create_directories(state, ec);
  if (ec) {
    err << "hlocache mount: cannot create " << state.string() << ": " << ec.message() << "\n";
    return 1;
  }
  if (!tiers->store) {
    auto store = cache::Store::Open(state / "store", MountStoreOptions(max_bytes));
    if (!store) {
      err << "hlocache mount: " << store.error().message() << "\n";
      return 1;
    }
    tiers->store = std::move(*store);
    tiers->store_dir = state / "store";
  }
  std::unique_ptr<server::Upstream> upstream;
  if (!tiers->Upstream().empty()) {
    server::UpstreamOptions options;
    options.url = tiers->Upstream();
    const client::CacheOptions client_defaults = client::CacheOptions::FromEnvironment();
    options.token = client_defaults.token;
    options.ca_cert = client_defaults.ca_cert;
    // The waits a training process's client has: a dead server costs a lookup this long once,
    // and is then left alone for its back-off.
    options.connect_timeout = client_defaults.connect_timeout;
    options.io_timeout = client_defaults.request_timeout;
    options.pending_file = state / "upstream-pending";
    // The server counts this mount's misses under its namespace.
    options.headers.emplace_back("X-Hlocache-Namespace", settings.file_namespace);
    auto made = server::Upstream::Make(std::move(options), *tiers->store);
    if (!made) {
      err << "hlocache mount: " << made.error().message() << "\n";
      return 1;
    }
    upstream = std::move(*made);
  }

  Mounted mounted;
  FileSystemOptions fs_options;
  fs_options.file_namespace = settings.file_namespace;
  fs_options.read_only = tiers->read_only;
  fs_options.state_dir = state;
  for (const std::string& p : settings.local_patterns) fs_options.local_patterns.push_back(p);
  fs_options.invalidate = [&mounted](const std::string& path) { mounted.Invalidate(path); };
  auto file_system =
      FileSystem::Make(std::move(fs_options), std::move(tiers->store), std::move(upstream));
  if (!file_system) {
    err << "hlocache mount: " << file_system.error().message() << "\n";
    return 1;
  }
  mounted.fs = file_system->get();
  const std::string canonical_mountpoint = fs::weakly_canonical(settings.mountpoint, ec).string();

  std::string options = "fsname=hlocache:" + settings.file_namespace +
                        ",subtype=hlocache,default_permissions,max_read=1048576";
  if (::geteuid() == 0) options += ",allow_other";  // Every user's training process.
  if (tiers->read_only) options += ",ro";
  std::vector<std::string> argv_text = {"hlocache-mount", "-o", options};
  if (settings.debug) argv_text.push_back("-d");
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  const fuse_operations ops = Operations();
  struct fuse* fuse = fuse_new(&args, &ops, sizeof ops, &mounted);
  if (fuse == nullptr) {
    err << "hlocache mount: cannot set up FUSE (see the line above)\n";
    return 1;
  }
  if (fuse_mount(fuse, settings.mountpoint.c_str()) != 0) {
    fuse_destroy(fuse);
    err << "hlocache mount: cannot mount on " << settings.mountpoint.string()
        << " (see the line above)\n";
    return 1;
  }
  mounted.fuse = fuse;
  WidenReadahead(canonical_mountpoint);
  mounted.invalidator = std::thread([&mounted] { mounted.RunInvalidator(); });
  fuse_session* session = fuse_get_session(fuse);
  fuse_set_signal_handlers(session);  // SIGTERM, SIGINT, SIGHUP end the loop.
  out << "hlocache: mounted " << settings.mountpoint.string() << " (namespace "
      << settings.file_namespace << (mounted.fs != nullptr && tiers->read_only ? ", read-only" : "")
      << ") on " << tiers->store_dir.string() << std::endl;
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(config, 64);
  const int loop = fuse_loop_mt(fuse, config);
  fuse_loop_cfg_destroy(config);
  fuse_remove_signal_handlers(session);
  mounted.StopInvalidator();
  fuse_unmount(fuse);
  mounted.fuse = nullptr;
  fuse_destroy(fuse);
  file_system->reset();  // Closes the store; writes the upload queue for the next mount.
  fuse_opt_free_args(&args);
  if (loop != 0 && loop != SIGTERM && loop != SIGINT && loop != SIGHUP) {
    err << "hlocache mount: the FUSE loop ended with " << loop << "\n";
    return 1;
  }
  out << "hlocache: unmounted " << settings.mountpoint.string() << std::endl;
  return 0;
}

int RunMountStats(const fs::path& mountpoint, std::ostream& out, std::ostream& err) {
  const ssize_t n = ::getxattr(mountpoint.c_str(), kStatsAttribute, nullptr, 0);
  if (n < 0) {
    err << "hlocache stats: " << mountpoint.string() << " is not an hlocache mount ("
        << std::strerror(errno) << ")\n";
    return 1;
  }
  std::string json(static_cast<size_t>(n), '\0');
  const ssize_t got = ::getxattr(mountpoint.c_str(), kStatsAttribute, json.data(), json.size());
  if (got < 0) {
    err << "hlocache stats: " << std::strerror(errno) << "\n";
    return 1;
  }
  json.resize(static_cast<size_t>(got));
  out << json << "\n";
  return 0;
}

}  // namespace hlocache::mount
