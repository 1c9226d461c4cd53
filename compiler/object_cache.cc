#include "compiler/object_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/fast_hash.h"
#include "common/file.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'H', 'L', 'C', 'O', 'B', 'J', '0', '1'};
constexpr size_t kHeaderBytes = sizeof kMagic + sizeof(uint64_t);

uint64_t BodyHash(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

fs::path DefaultObjectCacheRoot() {
  if (const char* chosen = ::getenv("HLOCACHE_OBJECT_CACHE"); chosen != nullptr && *chosen != 0) {
    return std::string_view(chosen) == "-" ? fs::path() : fs::path(chosen);
  }
  const fs::path folder = UserCacheFolder();
  return folder.empty() ? folder : folder / "objects";
}

ObjectCache::ObjectCache(fs::path root, uint64_t max_bytes)
    : root_(std::move(root)), max_bytes_(max_bytes) {}

fs::path ObjectCache::PathOf(std::string_view key) const {
  const std::string digits = Hex128(key.data(), key.size());
  return root_ / digits.substr(0, 2) / digits.substr(2);
}

std::optional<std::string> ObjectCache::Find(std::string_view key) const {
  if (!enabled()) return std::nullopt;
  const fs::path path = PathOf(key);
  auto entry = ReadWholeFile(path);
  if (!entry) return std::nullopt;
  uint64_t want = 0;
  if (entry->size() >= kHeaderBytes) std::memcpy(&want, entry->data() + sizeof kMagic, sizeof want);
  const std::string_view body =
      std::string_view(*entry).substr(std::min(entry->size(), kHeaderBytes));
  if (entry->size() < kHeaderBytes || std::memcmp(entry->data(), kMagic, sizeof kMagic) != 0 ||
      BodyHash(body) != want) {
    std::error_code ec;
    fs::remove(path, ec);  // Damaged: compiled again, and stored whole.
    return std::nullopt;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // Recently used, for Prune.
  entry->erase(0, kHeaderBytes);
  return std::move(*entry);
}

void ObjectCache::Store(std::string_view key, std::string_view bytes) const {
  if (!enabled()) return;
  const fs::path path = PathOf(key);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return;
  std::string aside = (path.parent_path() / ".storing-XXXXXX").string();
  const int fd = ::mkstemp(aside.data());
  if (fd < 0) return;
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, sizeof kMagic);
  const uint64_t hash = BodyHash(bytes);
  std::memcpy(header + sizeof kMagic, &hash, sizeof hash);
  const bool written = WriteAll(fd, std::string_view(header, sizeof header)) && WriteAll(fd, bytes);
  ::close(fd);
  if (!written || ::rename(aside.c_str(), path.c_str()) != 0) {
    ::unlink(aside.c_str());
    return;
  }
  // The scan costs a stat an entry: made at this object's first store and every 32nd after
  // (a toolchain makes one for each module), the cache exceeds its bound by a few entries at most.
  if (stores_.fetch_add(1) % 32 == 0) Prune();
}

// Sums the entries and removes the least recently used until the whole is within 90% of the
// bound (so that a full cache is not scanned again at the next store); entries being stored
// for over an hour were left by processes that died.
void ObjectCache::Prune() const {
  struct Entry {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  const auto an_hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  // Iterated with error codes throughout: entries and shards may vanish meanwhile (another
  // process pruning), which must not throw.
  for (fs::directory_iterator shard(root_, ec), end; !ec && shard != end; shard.increment(ec)) {
    std::error_code inner;
    if (!shard->is_directory(inner)) continue;
    for (fs::directory_iterator e(shard->path(), inner); !inner && e != end; e.increment(inner)) {
      std::error_code stat_error;
      const auto used = e->last_write_time(stat_error);
      if (stat_error) continue;
      if (e->path().filename().string().starts_with(".storing-")) {
        if (used < an_hour_ago) fs::remove(e->path(), stat_error);
        continue;
      }
      const uint64_t bytes = e->file_size(stat_error);
      if (stat_error) continue;
      total += bytes;
      entries.push_back({used, bytes, e->path()});
    }
  }
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  const uint64_t goal = max_bytes_ / 10 * 9;
  for (const Entry& e : entries) {
    if (total <= goal) break;
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
}

}  // namespace hlocache::compiler
