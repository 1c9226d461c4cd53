#include "compiler/semantics/retained_memory.h"

#include <map>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)
#define HLOCACHE_KEEP_NOTHING 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HLOCACHE_KEEP_NOTHING 1
#endif
#endif
#ifndef HLOCACHE_KEEP_NOTHING
#define HLOCACHE_KEEP_NOTHING 0
#endif

namespace hlocache::interp {
namespace {

struct Retained {
  std::mutex mu;
  int scopes = 0;
  uint64_t bytes = 0;
  std::multimap<size_t, void*> free_buffers;  // By size.

  void FreeAllLocked() {
    for (const auto& [size, p] : free_buffers) ::operator delete(p);
    free_buffers.clear();
    bytes = 0;
  }
};

Retained& State() {
  static Retained* const state = new Retained();  // Never destroyed: used until exit.
  return *state;
}

}  // namespace

void* AllocateRetainable(size_t bytes) {
  if (bytes >= kRetainedMinBytes && !HLOCACHE_KEEP_NOTHING) {
    Retained& r = State();
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto it = r.free_buffers.find(bytes); it != r.free_buffers.end()) {
      void* p = it->second;
      r.free_buffers.erase(it);
      r.bytes -= bytes;
      return p;
    }
  }
  return ::operator new(bytes);
}

void FreeRetainable(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes >= kRetainedMinBytes && !HLOCACHE_KEEP_NOTHING) {
    Retained& r = State();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.scopes > 0 && r.bytes + bytes <= kRetainedMaxBytes) {
      r.free_buffers.emplace(bytes, p);
      r.bytes += bytes;
      return;
    }
  }
  ::operator delete(p);
}

uint64_t RetainedBytes() {
  Retained& r = State();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.bytes;
}

bool RetainsBuffers() { return !HLOCACHE_KEEP_NOTHING; }

RetainScope::RetainScope() {
  Retained& r = State();
  std::lock_guard<std::mutex> lock(r.mu);
  ++r.scopes;
}

RetainScope::~RetainScope() {
  Retained& r = State();
  std::lock_guard<std::mutex> lock(r.mu);
  if (--r.scopes == 0) r.FreeAllLocked();
}

}  // namespace hlocache::interp
