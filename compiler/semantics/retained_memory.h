// Large array buffers kept for reuse while an evaluation runs.
//
// The reference interpreter gives every instruction's value buffers of its own and frees them at
// their last use, so a large module allocates and frees the same few sizes many thousand times.
// Freed to the C library, a buffer of megabytes goes back to the kernel, and its next
// allocation pays a page fault for every 4 KiB of it: measured on a module of 17,000
// elementwise ops on [1280,1280] arrays, 58 of its 159 seconds were the kernel's. While a
// RetainScope exists, freed buffers of at least kRetainedMinBytes (up to kRetainedMaxBytes in
// all) are kept and handed to the next allocation of the same size; when the last scope ends
// they are freed.
//
// Under AddressSanitizer nothing is kept, so that a use after free is still found.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace hlocache::interp {

inline constexpr size_t kRetainedMinBytes = size_t{1} << 20;
inline constexpr uint64_t kRetainedMaxBytes = uint64_t{1} << 30;

void* AllocateRetainable(size_t bytes);
void FreeRetainable(void* p, size_t bytes);

// The bytes of freed buffers kept now.
uint64_t RetainedBytes();

// Whether buffers are kept at all in this build (not under AddressSanitizer).
bool RetainsBuffers();

// Buffers are kept while at least one scope exists (in any thread).
class RetainScope {
 public:
  RetainScope();
  ~RetainScope();
  RetainScope(const RetainScope&) = delete;
  RetainScope& operator=(const RetainScope&) = delete;
};

// A std::allocator that goes through the functions above.
template <class T>
struct RetainableAllocator {
  using value_type = T;
  RetainableAllocator() = default;
  template <class U>
  RetainableAllocator(const RetainableAllocator<U>&) {}  // NOLINT: allocators convert implicitly.
  T* allocate(size_t n) { return static_cast<T*>(AllocateRetainable(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeRetainable(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const RetainableAllocator<U>&) const {
    return true;
  }
};

}  // namespace hlocache::interp
