#include "server/memory_tier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hlocache::server {

MemoryBody::~MemoryBody() {
  ::munmap(const_cast<char*>(data_), size_);
  ::close(fd_);
}

MemoryBodyFiller::~MemoryBodyFiller() {
  if (fd_ >= 0) ::close(fd_);
  tier_.FillerDone(key_, size_);
}

Status MemoryBodyFiller::Append(std::span<const char> bytes) {
  if (fd_ < 0 || bytes.size() > size_ - appended_) {
    return FailedPrecondition("memory tier: more bytes than announced for " + key_);
  }
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::string("memory tier: write: ") + std::strerror(errno));
    appended_ += static_cast<uint64_t>(n);
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<std::shared_ptr<const MemoryBody>> MemoryBodyFiller::Seal() {
  if (fd_ < 0 || appended_ != size_) {
    return Error(FailedPrecondition("memory tier: " + std::to_string(appended_) + " of " +
                                    std::to_string(size_) + " bytes of " + key_ + " appended"));
  }
  if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return Error(IoError(std::string("memory tier: cannot seal: ") + std::strerror(errno)));
  }
  void* data = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (data == MAP_FAILED) {
    return Error(IoError(std::string("memory tier: mmap: ") + std::strerror(errno)));
  }
  const int fd = fd_;
  fd_ = -1;
  return std::shared_ptr<const MemoryBody>(
      new MemoryBody(key_, checksum_, fd, static_cast<const char*>(data), size_));
}

std::unique_ptr<MemoryBodyFiller> MemoryTier::StartFilling(std::string_view key, uint64_t size,
                                                           const cache::Hash128& checksum) {
  if (!Admits(size)) return nullptr;
  std::string key_text(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (filling_bytes_ + size > capacity_ || !filling_.emplace(key_text, size).second) {
      return nullptr;
    }
    filling_bytes_ += size;
  }
  const int fd = ::memfd_create("hlocache-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    FillerDone(key_text, size);
    return nullptr;
  }
  return std::unique_ptr<MemoryBodyFiller>(
      new MemoryBodyFiller(*this, std::move(key_text), checksum, size, fd));
}

void MemoryTier::FillerDone(const std::string& key, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (filling_.erase(key) != 0) filling_bytes_ -= size;
}

size_t MemoryTier::filling() const {
  std::lock_guard<std::mutex> lock(mu_);
  return filling_.size();
}

std::shared_ptr<const MemoryBody> MemoryTier::Find(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return *it->second;
}

void MemoryTier::Insert(std::shared_ptr<const MemoryBody> body) {
  const uint64_t size = body->bytes().size();
  if (!Admits(size) || most_bodies_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_key_.find(body->key()); it != by_key_.end()) {
    bytes_ -= (*it->second)->bytes().size();
    lru_.erase(it->second);
    by_key_.erase(it);
  }
  while (!lru_.empty() && (bytes_ + size > capacity_ || lru_.size() >= most_bodies_)) {
    bytes_ -= lru_.back()->bytes().size();
    by_key_.erase(lru_.back()->key());
    lru_.pop_back();
  }
  lru_.push_front(std::move(body));
  by_key_.emplace(lru_.front()->key(), lru_.begin());
  bytes_ += size;
}

void MemoryTier::Erase(std::string_view key, const MemoryBody* stale) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end() || (stale != nullptr && it->second->get() != stale)) return;
  bytes_ -= (*it->second)->bytes().size();
  lru_.erase(it->second);
  by_key_.erase(it);
}

uint64_t MemoryTier::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t MemoryTier::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

MemoryTierStats MemoryTier::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {.bytes = bytes_, .bodies = lru_.size(), .capacity_bytes = capacity_};
}

}  // namespace hlocache::server
