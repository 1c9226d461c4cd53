// Store throughput against its peers: durable puts and hot gets of 4 KiB, 1 MiB and 64 MiB
// artifacts, for
//   hlocache  cache::Store (LevelDB bytes + SQLite catalog), sync_puts on, checksum-verified Get;
//   LevelDB   a bare leveldb::DB (no compression, 64 MiB write buffer, block cache and files),
//             WriteOptions.sync = true (with that write buffer, the 5000 x 4 KiB set stays in
//             the memtable: its gets never reach a table file);
//   LevelDB, store's settings   the same with the store's LevelDB settings (4 MiB memtables so
//             a store that filled its disk can still reopen, 16 MiB tables, a Bloom filter): the
//             gap between the two LevelDB rows is the configuration, the rest is the store;
//   files     one file per key: write a temp file, fsync it, rename it into place, fsync the
//             directory (so the rename itself is durable, as the other two are); get = open,
//             fstat, read the whole file into a std::string, close.
// Artifacts are random, incompressible bytes, each one distinct (its first 16 bytes differ);
// keys are well-formed "v1-" + 32 hex digits spread over the key space, like real keys. For each
// size, each system gets a fresh directory /var/tmp/hlocache-bench-XXXXXX, removed when the size
// is done. Puts, then gets, run in 4 rounds in which the four systems take turns (in a rotating
// order), so that a stretch of slow fsyncs or other load on the machine lands on all three and
// the ratios stay meaningful on a noisy machine. Before the gets every system settles, untimed
// (LevelDB and the store compact, so no compaction runs beside the timed reads; the files'
// writeback is synced). Gets follow one untimed warm-up pass over every
// key (which also compares each artifact byte for byte) and go in a shuffled order cycling over
// the stored keys; each timed get is checked for the right size. Any error is printed and the
// benchmark exits 1. One thread throughout. malloc keeps freed memory in the process (see main),
// so no get pays for faulting in a fresh buffer.
//
// Also printed: the time to close the 4 KiB store and reopen it (Store::Open on a populated
// directory), and a check that its bytes and counters survived.
//
// Run: make build && ./build/bench/store_bench   (`make bench` runs key_bench only), or
//      cmake --build build --target store_bench && ./build/bench/store_bench
//      HLOCACHE_BENCH_SCALE=0.2 ./build/bench/store_bench   (quick run: 0.2x the op counts)
// Needs about 1.6 GB free in /var/tmp at scale 1 (the four 64 MiB sets at once).
#include <fcntl.h>
#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/options.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key.h"
#include "cache/store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using hlocache::cache::Store;

// Temporary directories still on disk; removed by Fatal and at the end.
std::vector<std::string> g_tmp_dirs;

void RemoveTmpDir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) {
    std::fprintf(stderr, "store_bench: cannot remove %s: %s\n", dir.c_str(), ec.message().c_str());
  }
  std::erase(g_tmp_dirs, dir);
}

[[noreturn]] __attribute__((format(printf, 1, 2))) void Fatal(const char* fmt, ...) {
  std::fflush(stdout);
  std::fputs("store_bench: error: ", stderr);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  for (const std::string& dir : std::vector<std::string>(g_tmp_dirs)) RemoveTmpDir(dir);
  std::exit(1);
}

std::string MakeTmpDir() {
  char tmpl[] = "/var/tmp/hlocache-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) Fatal("mkdtemp %s: %s", tmpl, std::strerror(errno));
  g_tmp_dirs.emplace_back(tmpl);
  return tmpl;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key i of the size class `size`: "v1-" + exactly 32 lowercase hex digits, pseudo-random so
// that inserts land all over the key space as real (hash) keys do.
std::string MakeKey(uint64_t size, uint64_t i) {
  uint64_t hi = SplitMix64(size * 0x100000001b3ull + i);
  uint64_t lo = SplitMix64(hi ^ i);
  char buf[3 + 32 + 1];
  std::snprintf(buf, sizeof buf, "v1-%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  std::string key(buf);
  if (!hlocache::cache::IsWellFormedKey(key)) Fatal("benchmark bug: malformed key %s", buf);
  return key;
}

// The 16 bytes that make artifact i of a size class distinct from the others.
void ArtifactPrefix(uint64_t i, char out[16]) {
  uint64_t a = SplitMix64(i * 2 + 1), b = SplitMix64(i * 2 + 2);
  std::memcpy(out, &a, 8);
  std::memcpy(out + 8, &b, 8);
}

// ---------------------------------------------------------------------------------------------
// The systems under test. Put and Get call Fatal on any failure (a miss included).

class System {
 public:
  virtual ~System() = default;
  virtual void Put(const std::string& key, std::string_view bytes) = 0;
  virtual std::string Get(const std::string& key) = 0;
  // Untimed, between the puts and the gets: lets background work the puts started finish, so
  // that gets measure reads and not a compaction running beside them.
  virtual void Settle() {}
};

hlocache::cache::StoreOptions BenchStoreOptions() {
  hlocache::cache::StoreOptions opts;  // Defaults: sync_puts = true, 64 MiB block cache.
  opts.max_bytes = 0;
  opts.min_free_bytes = 0;
  return opts;
}

class HlocacheSystem : public System {
 public:
  explicit HlocacheSystem(std::unique_ptr<Store> store) : store_(std::move(store)) {
    info_.target = "cpu-x86-64-v3";
    info_.compiler_id = "store_bench/1";
    info_.graph_name = "bench";
    info_.compile_seconds = 1.0;
  }
  void Put(const std::string& key, std::string_view bytes) override {
    auto r = store_->Put(key, bytes, info_);
    if (!r.has_value()) Fatal("hlocache Put %s: %s", key.c_str(), r.error().ToString().c_str());
    if (*r != hlocache::cache::PutOutcome::kStored) {
      Fatal("hlocache Put %s into a fresh store reported kAlreadyPresent", key.c_str());
    }
  }
  std::string Get(const std::string& key) override {
    auto r = store_->Get(key);
    if (!r.has_value()) Fatal("hlocache Get %s: %s", key.c_str(), r.error().ToString().c_str());
    if (!r->has_value()) Fatal("hlocache Get %s: miss for a stored key", key.c_str());
    return std::move(**r);
  }
  void Settle() override {
    if (hlocache::Status s = store_->Compact(); !s.ok())
      Fatal("hlocache Compact: %s", s.ToString().c_str());
  }
  Store& store() { return *store_; }

 private:
  std::unique_ptr<Store> store_;
  hlocache::cache::ArtifactInfo info_;
};

class LevelDbSystem : public System {
 public:
  // as_store: the settings cache::Store uses (4 MiB memtables, 16 MiB tables, a Bloom filter),
  // which separate what LevelDB's configuration costs from what the store adds on top.
  LevelDbSystem(const std::string& dir, bool as_store) {
    cache_.reset(leveldb::NewLRUCache(64u << 20));
    leveldb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = as_store ? 4u << 20 : 64u << 20;
    o.max_file_size = as_store ? 16u << 20 : 64u << 20;
    if (as_store) {
      filter_.reset(leveldb::NewBloomFilterPolicy(10));
      o.filter_policy = filter_.get();
    }
    o.compression = leveldb::kNoCompression;
    o.block_cache = cache_.get();
    leveldb::DB* db = nullptr;
    leveldb::Status s = leveldb::DB::Open(o, dir, &db);
    if (!s.ok()) Fatal("leveldb Open %s: %s", dir.c_str(), s.ToString().c_str());
    db_.reset(db);
  }
  ~LevelDbSystem() override { db_.reset(); }  // The DB before its block cache and filter.
  void Put(const std::string& key, std::string_view bytes) override {
    leveldb::WriteOptions w;
    w.sync = true;
    leveldb::Status s = db_->Put(w, key, leveldb::Slice(bytes.data(), bytes.size()));
    if (!s.ok()) Fatal("leveldb Put %s: %s", key.c_str(), s.ToString().c_str());
  }
  std::string Get(const std::string& key) override {
    std::string value;
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, &value);
    if (!s.ok()) Fatal("leveldb Get %s: %s", key.c_str(), s.ToString().c_str());
    return value;
  }
  void Settle() override { db_->CompactRange(nullptr, nullptr); }

 private:
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;
};

class FilesSystem : public System {
 public:
  explicit FilesSystem(const std::string& dir) : dir_(dir) {
    dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) Fatal("open %s: %s", dir.c_str(), std::strerror(errno));
  }
  ~FilesSystem() override { ::close(dir_fd_); }
  void Put(const std::string& key, std::string_view bytes) override {
    std::string tmp = ".tmp." + key;
    int fd = ::openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) Fatal("files: create %s/%s: %s", dir_.c_str(), tmp.c_str(), std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Fatal("files: write %s: %s", tmp.c_str(), std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) Fatal("files: fsync %s: %s", tmp.c_str(), std::strerror(errno));
    if (::close(fd) != 0) Fatal("files: close %s: %s", tmp.c_str(), std::strerror(errno));
    if (::renameat(dir_fd_, tmp.c_str(), dir_fd_, key.c_str()) != 0) {
      Fatal("files: rename %s: %s", tmp.c_str(), std::strerror(errno));
    }
    // The directory fsync makes the rename durable too (we do it: same guarantee as the others).
    if (::fsync(dir_fd_) != 0) Fatal("files: fsync %s: %s", dir_.c_str(), std::strerror(errno));
  }
  std::string Get(const std::string& key) override {
    int fd = ::openat(dir_fd_, key.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fatal("files: open %s/%s: %s", dir_.c_str(), key.c_str(), std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) Fatal("files: fstat %s: %s", key.c_str(), std::strerror(errno));
    std::string out;
    int err = 0;
    out.resize_and_overwrite(static_cast<size_t>(st.st_size), [&](char* p, size_t n) {
      size_t done = 0;
      while (done < n) {
        ssize_t r = ::read(fd, p + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          err = r < 0 ? errno : EIO;  // EOF before st_size: the file shrank.
          break;
        }
        done += static_cast<size_t>(r);
      }
      return done;
    });
    ::close(fd);
    if (err != 0) Fatal("files: read %s: %s", key.c_str(), std::strerror(err));
    return out;
  }

 private:
  std::string dir_;
  int dir_fd_ = -1;
};

// ---------------------------------------------------------------------------------------------

struct SizeClass {
  const char* label;
  size_t bytes;
  size_t puts;  // Distinct artifacts stored.
  size_t gets;  // Timed gets, cycling over them.
};

struct Workload {
  SizeClass size;
  std::vector<std::string> keys;
  std::string base;             // Random bytes; artifact i = base with its first 16 replaced.
  std::vector<uint32_t> order;  // The timed gets' key indices.
};

// Whether `got` is exactly artifact i.
bool SameAsArtifact(const Workload& w, size_t i, const std::string& got) {
  if (got.size() != w.base.size()) return false;
  char prefix[16];
  ArtifactPrefix(i, prefix);
  size_t head = std::min<size_t>(16, got.size());
  return std::memcmp(got.data(), prefix, head) == 0 &&
         std::memcmp(got.data() + head, w.base.data() + head, got.size() - head) == 0;
}

size_t FirstDifference(const Workload& w, size_t i, const std::string& got) {
  std::string want = w.base;
  char prefix[16];
  ArtifactPrefix(i, prefix);
  std::memcpy(want.data(), prefix, std::min<size_t>(16, want.size()));
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  return k;
}

// Durable puts of artifacts [lo, hi); returns the seconds they took. `buf` holds the artifact
// bytes and is edited in place (its first 16 bytes) between puts: no copy inside the loop.
double TimePuts(System& sys, const Workload& w, size_t lo, size_t hi, std::string& buf) {
  const size_t head = std::min<size_t>(16, buf.size());
  auto t0 = Clock::now();
  for (size_t i = lo; i < hi; ++i) {
    char prefix[16];
    ArtifactPrefix(i, prefix);
    std::memcpy(buf.data(), prefix, head);
    sys.Put(w.keys[i], buf);
  }
  return Seconds(Clock::now() - t0);
}

// The untimed warm-up: every key once, compared byte for byte.
void WarmUpAndVerify(const char* name, System& sys, const Workload& w) {
  for (size_t i = 0; i < w.keys.size(); ++i) {
    std::string got = sys.Get(w.keys[i]);
    if (!SameAsArtifact(w, i, got)) {
      Fatal(
          "%s, %s: Get %s returned other bytes than were put (%zu bytes, want %zu; first "
          "difference at offset %zu)",
          name, w.size.label, w.keys[i].c_str(), got.size(), w.base.size(),
          FirstDifference(w, i, got));
    }
  }
}

// Timed gets of w.order[lo, hi), each checked for size; returns the seconds they took.
double TimeGets(const char* name, System& sys, const Workload& w, size_t lo, size_t hi) {
  size_t bad = 0, bad_index = 0, bad_size = 0;
  auto t0 = Clock::now();
  for (size_t k = lo; k < hi; ++k) {
    std::string got = sys.Get(w.keys[w.order[k]]);
    if (got.size() != w.base.size() && bad++ == 0) {
      bad_index = w.order[k];
      bad_size = got.size();
    }
  }
  double seconds = Seconds(Clock::now() - t0);
  if (bad != 0) {
    Fatal("%s, %s: %zu timed gets returned the wrong size (first: %s, %zu bytes, want %zu)", name,
          w.size.label, bad, w.keys[bad_index].c_str(), bad_size, w.base.size());
  }
  return seconds;
}

Workload MakeWorkload(const SizeClass& size) {
  Workload w;
  w.size = size;
  for (size_t i = 0; i < size.puts; ++i) w.keys.push_back(MakeKey(size.bytes, i));
  std::mt19937_64 rng(0x5eed0000 + size.bytes);
  w.base.resize(size.bytes);
  size_t i = 0;
  for (; i + 8 <= size.bytes; i += 8) {
    uint64_t v = rng();
    std::memcpy(w.base.data() + i, &v, 8);
  }
  for (uint64_t v = rng(); i < size.bytes; ++i, v >>= 8) w.base[i] = static_cast<char>(v);
  // Shuffled passes over all keys, as many as the timed gets need.
  std::mt19937_64 shuffle_rng(0x0bde5 + size.bytes);
  std::vector<uint32_t> pass(size.puts);
  while (w.order.size() < size.gets) {
    for (size_t k = 0; k < pass.size(); ++k) pass[k] = static_cast<uint32_t>(k);
    std::shuffle(pass.begin(), pass.end(), shuffle_rng);
    size_t take = std::min(pass.size(), size.gets - w.order.size());
    w.order.insert(w.order.end(), pass.begin(), pass.begin() + static_cast<ptrdiff_t>(take));
  }
  return w;
}

// Closes the store of the 4 KiB phase (which flushes its access buffer), times Store::Open on the
// populated directory, and checks that bytes and counters survived. Returns the line to print.
std::string MeasureReopen(std::unique_ptr<System> sys, const std::string& dir, const Workload& w,
                          double fresh_open_s) {
  auto t0 = Clock::now();
  sys.reset();
  double close_s = Seconds(Clock::now() - t0);
  t0 = Clock::now();
  auto reopened = Store::Open(dir, BenchStoreOptions());
  double reopen_s = Seconds(Clock::now() - t0);
  if (!reopened.has_value()) {
    Fatal("Store::Open (reopen) %s: %s", dir.c_str(), reopened.error().ToString().c_str());
  }
  HlocacheSystem again(std::move(*reopened));
  auto stats = again.store().Stats();
  if (!stats.has_value()) Fatal("Store::Stats after reopen: %s", stats.error().ToString().c_str());
  // Keys spread over the whole set are still there and intact.
  for (size_t i = 0; i < w.keys.size(); i += std::max<size_t>(1, w.keys.size() / 50)) {
    if (!SameAsArtifact(w, i, again.Get(w.keys[i]))) {
      Fatal("after reopen, Get %s returned other bytes than were stored", w.keys[i].c_str());
    }
  }
  const uint64_t n = w.size.puts, bytes = n * w.size.bytes;
  const uint64_t hits = n + w.size.gets;  // The warm-up pass and the timed gets.
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "Store::Open: %.1f ms fresh; after the 4 KiB phase (%llu entries, %.1f MB) close "
                "%.1f ms, reopen %.1f ms. Catalog after reopen: %llu entries, %llu bytes, %llu "
                "hits, %llu puts",
                fresh_open_s * 1e3, static_cast<unsigned long long>(n), bytes / 1e6, close_s * 1e3,
                reopen_s * 1e3, static_cast<unsigned long long>(stats->entries),
                static_cast<unsigned long long>(stats->bytes),
                static_cast<unsigned long long>(stats->hits),
                static_cast<unsigned long long>(stats->puts));
  std::string line = buf;
  if (stats->entries != n || stats->bytes != bytes || stats->hits != hits || stats->puts != n) {
    std::snprintf(buf, sizeof buf,
                  " (MISMATCH: expected %llu entries, %llu bytes, %llu hits, %llu puts)",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(hits), static_cast<unsigned long long>(n));
    line += buf;
    std::fprintf(stderr, "store_bench: warning:%s\n", buf);
  }
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown CPU";
}

int CpuCount() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
}

std::string FilesystemType(const char* path) {
  struct statfs st;
  if (::statfs(path, &st) != 0) return "unknown";
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794c7630:
      return "overlayfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "fs 0x%lx", static_cast<unsigned long>(st.f_type));
      return buf;
    }
  }
}

std::string Now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %Z", std::localtime(&t));
  return buf;
}

// The 1-minute load average: other work on the machine makes every number here lower.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

double ScaleFromEnv() {
  const char* s = std::getenv("HLOCACHE_BENCH_SCALE");
  if (s == nullptr || *s == '\0') return 1.0;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
    Fatal("HLOCACHE_BENCH_SCALE=%s: want a positive number", s);
  }
  return v;
}

// Three significant digits at least, so that 64 MiB rates (a few ops/s) keep their precision.
std::string Rate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

size_t Scaled(size_t n, double scale) {
  return std::max<size_t>(1, static_cast<size_t>(std::llround(static_cast<double>(n) * scale)));
}

}  // namespace

int main() {
  // Keep freed memory in the process (no mmap'd chunks, no trimming), as a long-running server's
  // allocator would: otherwise every 64 MiB get pays for faulting in a fresh buffer, which in a
  // VM that hands freed pages back to its host costs ~3 ms per MiB and drowns the stores' own
  // costs (the same for all three systems).
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const double scale = ScaleFromEnv();
  const std::string load_at_start = LoadAverage();
  const SizeClass base_sizes[] = {
      {"4 KiB", 4u << 10, 5000, 50000},
      {"1 MiB", 1u << 20, 300, 3000},
      {"64 MiB", 64u << 20, 8, 24},
  };
  constexpr int kSystems = 4;
  const char* const kNames[kSystems] = {"hlocache", "LevelDB", "LevelDB, store's settings",
                                        "files"};
  // Each phase runs in rounds, the systems taking turns (in a rotating order), so that a burst of
  // slow fsyncs or of other load on the machine lands on all three rather than on one.
  constexpr size_t kRounds = 4;
  struct Row {
    const char* size;
    size_t bytes, puts, gets;
    double put_seconds[kSystems] = {};
    double get_seconds[kSystems] = {};
  };
  std::vector<Row> rows;
  std::string open_line;

  for (const SizeClass& base : base_sizes) {
    SizeClass size = base;
    size.puts = Scaled(base.puts, scale);
    size.gets = Scaled(base.gets, scale);
    const Workload w = MakeWorkload(size);
    Row row{size.label, size.bytes, size.puts, size.gets};
    ::sync();  // No writeback left from the previous size to slow this one's fsyncs.

    std::string dirs[kSystems];
    for (std::string& dir : dirs) dir = MakeTmpDir();
    std::fprintf(stderr, "store_bench: %s: %zu puts, %zu gets each\n", size.label, size.puts,
                 size.gets);
    std::unique_ptr<System> systems[kSystems];
    auto t0 = Clock::now();
    auto opened = Store::Open(dirs[0], BenchStoreOptions());
    const double fresh_open_s = Seconds(Clock::now() - t0);
    if (!opened.has_value()) {
      Fatal("Store::Open %s: %s", dirs[0].c_str(), opened.error().ToString().c_str());
    }
    systems[0] = std::make_unique<HlocacheSystem>(std::move(*opened));
    systems[1] = std::make_unique<LevelDbSystem>(dirs[1], /*as_store=*/false);
    systems[2] = std::make_unique<LevelDbSystem>(dirs[2], /*as_store=*/true);
    systems[3] = std::make_unique<FilesSystem>(dirs[3]);

    std::string buf = w.base;
    const size_t put_rounds = std::min(kRounds, size.puts);
    for (size_t r = 0; r < put_rounds; ++r) {
      const size_t lo = size.puts * r / put_rounds, hi = size.puts * (r + 1) / put_rounds;
      for (size_t turn = 0; turn < kSystems; ++turn) {
        const size_t s = (turn + r) % kSystems;
        row.put_seconds[s] += TimePuts(*systems[s], w, lo, hi, buf);
      }
    }
    for (int s = 0; s < kSystems; ++s) systems[s]->Settle();
    ::sync();  // The files directory's writeback, likewise.
    for (int s = 0; s < kSystems; ++s) WarmUpAndVerify(kNames[s], *systems[s], w);
    const size_t get_rounds = std::min(kRounds, size.gets);
    for (size_t r = 0; r < get_rounds; ++r) {
      const size_t lo = size.gets * r / get_rounds, hi = size.gets * (r + 1) / get_rounds;
      for (size_t turn = 0; turn < kSystems; ++turn) {
        const size_t s = (turn + r) % kSystems;
        row.get_seconds[s] += TimeGets(kNames[s], *systems[s], w, lo, hi);
      }
    }

    if (&base == &base_sizes[0]) {
      open_line = MeasureReopen(std::move(systems[0]), dirs[0], w, fresh_open_s);
    }
    for (int s = 0; s < kSystems; ++s) {
      systems[s].reset();
      RemoveTmpDir(dirs[s]);
    }
    rows.push_back(row);
  }

  std::printf(
      "| size | system | put ops/s | put MB/s | get ops/s | get MB/s | get vs LevelDB | put vs "
      "LevelDB |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& row : rows) {
    const double ldb_put = row.puts / row.put_seconds[1], ldb_get = row.gets / row.get_seconds[1];
    for (int s = 0; s < kSystems; ++s) {
      const double put_ops = row.puts / row.put_seconds[s], get_ops = row.gets / row.get_seconds[s];
      std::printf("| %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", row.size, kNames[s],
                  Rate(put_ops).c_str(), Rate(put_ops * row.bytes / 1e6).c_str(),
                  Rate(get_ops).c_str(), Rate(get_ops * row.bytes / 1e6).c_str(), get_ops / ldb_get,
                  put_ops / ldb_put);
    }
  }
  std::printf("\n");
  std::printf("Ops per system (puts/gets): ");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%s%s %zu/%zu", i ? ", " : "", rows[i].size, rows[i].puts, rows[i].gets);
  }
  std::printf(
      " (HLOCACHE_BENCH_SCALE=%g); one thread; malloc keeps freed memory; data in /var/tmp (%s).\n",
      scale, FilesystemType("/var/tmp").c_str());
  std::printf("%s\n", open_line.c_str());
  std::printf("Machine: %d CPUs (nproc), %s; %s; load average %s at start, %s at end.\n",
              CpuCount(), CpuModel().c_str(), Now().c_str(), load_at_start.c_str(),
              LoadAverage().c_str());
  return 0;
}
