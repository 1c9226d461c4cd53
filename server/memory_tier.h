// The server's memory tier: the verified bodies of recently served artifacts, each in a sealed
// memory file (memfd), least recently used dropped past a byte budget.
//
// Why: a hit read from the store costs a LevelDB read that copies the bytes, their checksum,
// and a copy into the socket; for a 1 MiB executable that is three passes over it per request.
// A body in memory is only copied into the socket; with --zero-copy the kernel hands the memory
// file's pages to the socket instead (splice; server/connection.h). A fleet restarting asks for
// the same few executables many times, which is when this counts.
//
// Why it never serves what the store would not: a body enters only after every byte of it passed
// the store's verification, and the file is sealed (F_SEAL_WRITE, SHRINK, GROW) before anyone
// can read it, so nothing in this process or another can change it afterwards. The tier does
// not decide whether an entry still exists: the caller asks the store (Store::Touch) on every
// hit, which also records the access, and drops the body when the store no longer has that
// entry or has a different one under the key.
//
// Thread safety: every member may be called from any thread. A body is immutable and shared:
// one dropped from the tier stays valid for as long as a request holds it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cache/key.h"
#include "common/status.h"

namespace hlocache::server {

// One artifact's bytes in a sealed memory file, mapped read-only.
class MemoryBody {
 public:
  ~MemoryBody();
  MemoryBody(const MemoryBody&) = delete;
  MemoryBody& operator=(const MemoryBody&) = delete;

  const std::string& key() const { return key_; }
  const cache::Hash128& checksum() const { return checksum_; }
  // The bytes, valid while this object lives; `fd()` holds the same bytes from offset 0.
  std::span<const char> bytes() const { return {data_, size_}; }
  int fd() const { return fd_; }

 private:
  friend class MemoryBodyFiller;
  MemoryBody(std::string key, cache::Hash128 checksum, int fd, const char* data, uint64_t size)
      : key_(std::move(key)), checksum_(checksum), fd_(fd), data_(data), size_(size) {}

  const std::string key_;
  const cache::Hash128 checksum_;
  const int fd_;
  const char* const data_;
  const uint64_t size_;
};

class MemoryTier;

// Copies an artifact's verified bytes, in order, into a new memory file. Not thread-safe; must
// not outlive the tier that started it.
class MemoryBodyFiller {
 public:
  ~MemoryBodyFiller();  // Closes the file if it was never sealed; the key may be filled again.
  MemoryBodyFiller(const MemoryBodyFiller&) = delete;
  MemoryBodyFiller& operator=(const MemoryBodyFiller&) = delete;

  // Appends bytes; kIoError when the kernel refuses them (out of memory).
  Status Append(std::span<const char> bytes);
  // Seals the file and maps it. kFailedPrecondition unless exactly the announced size was
  // appended.
  Result<std::shared_ptr<const MemoryBody>> Seal();

 private:
  friend class MemoryTier;
  MemoryBodyFiller(MemoryTier& tier, std::string key, cache::Hash128 checksum, uint64_t size,
                   int fd)
      : tier_(tier), key_(std::move(key)), checksum_(checksum), size_(size), fd_(fd) {}

  MemoryTier& tier_;
  std::string key_;
  cache::Hash128 checksum_;
  uint64_t size_;
  uint64_t appended_ = 0;
  int fd_;
};

// What the tier holds at one moment, for /metrics and /v1/stats.
struct MemoryTierStats {
  uint64_t bytes = 0;           // In the bodies kept.
  uint64_t bodies = 0;          // Kept.
  uint64_t capacity_bytes = 0;  // The budget (`hlocache serve --memory-tier`).
};

class MemoryTier {
 public:
  // Bodies smaller than this are not kept: a small hit read from the store goes out in one send
  // with its headers too, and the store's read of it costs little beside that.
  static constexpr uint64_t kSmallestBody = 64 << 10;

  // Each body holds a file descriptor: no more than this many bodies are kept, so a budget
  // filled with small bodies cannot take the descriptors that connections need.
  static constexpr size_t kMostBodies = 512;

  // `capacity_bytes`: the budget for all bodies together; a body larger than a quarter of it
  // is not kept (one would evict most of the others). `most_bodies`: the count kept at most.
  explicit MemoryTier(uint64_t capacity_bytes, size_t most_bodies = kMostBodies)
      : capacity_(capacity_bytes), most_bodies_(most_bodies) {}

  // Whether a body of `size` bytes would be kept.
  bool Admits(uint64_t size) const { return size >= kSmallestBody && size <= capacity_ / 4; }

  // A new filler for `key`'s body of `size` bytes with `checksum`; nullptr when the size is not
  // admitted, when `key` is being filled already, when the bodies being filled would pass the
  // budget, or when no memory file could be made. The caller then serves the hit without the
  // tier. (A fleet that asks for one large executable all at once makes one copy of it here,
  // not one per request.)
  std::unique_ptr<MemoryBodyFiller> StartFilling(std::string_view key, uint64_t size,
                                                 const cache::Hash128& checksum);

  // The body kept for `key` (now the most recently used), or nullptr.
  std::shared_ptr<const MemoryBody> Find(std::string_view key);
  // Keeps `body`, replacing any under its key, and drops least recently used bodies until the
  // total is within the budget and the count within `most_bodies`.
  void Insert(std::shared_ptr<const MemoryBody> body);
  // Drops `key`'s body, if `stale` is it (a newer body put in meanwhile stays); nullptr drops
  // whatever is kept.
  void Erase(std::string_view key, const MemoryBody* stale = nullptr);

  uint64_t bytes() const;
  size_t size() const;
  size_t filling() const;  // Fillers alive.
  MemoryTierStats Stats() const;

 private:
  friend class MemoryBodyFiller;
  void FillerDone(const std::string& key, uint64_t size);

  using Lru = std::list<std::shared_ptr<const MemoryBody>>;  // Most recently used first.

  const uint64_t capacity_;
  const size_t most_bodies_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string_view, Lru::iterator> by_key_;  // Views of the bodies' keys.
  uint64_t bytes_ = 0;
  std::unordered_map<std::string, uint64_t> filling_;  // Keys being filled, and their sizes.
  uint64_t filling_bytes_ = 0;
};

}  // namespace hlocache::server
