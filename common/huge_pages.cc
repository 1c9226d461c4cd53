#include "common/huge_pages.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace hlocache {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
#define HLOCACHE_FOREIGN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HLOCACHE_FOREIGN_ALLOCATOR 1
#endif
#endif
#ifndef HLOCACHE_FOREIGN_ALLOCATOR
#define HLOCACHE_FOREIGN_ALLOCATOR 0
#endif

uintptr_t RoundUp(uintptr_t x) { return (x + kHugePage - 1) & ~(kHugePage - 1); }

}  // namespace

void AdviseHugePages(const void* data, size_t bytes) {
  if (data == nullptr || bytes < kHugePage) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = RoundUp(begin);
  const uintptr_t last = (begin + bytes) & ~(kHugePage - 1);
  if (first >= last) return;
#ifdef MADV_HUGEPAGE
  // Derived from `data` (not cast back from an integer): the same object, offset in bytes.
  char* start = const_cast<char*>(static_cast<const char*>(data)) + (first - begin);
  (void)::madvise(start, last - first, MADV_HUGEPAGE);
#endif
}

bool HeapPreparable() { return !HLOCACHE_FOREIGN_ALLOCATOR; }

void PrepareHeapForHugePages(size_t bytes) {
  if (bytes < kHugePage || !HeapPreparable()) return;
  // The heap grows by at least `bytes` at a time and keeps what is freed; allocations up to
  // 32 MiB (the most the C library takes for this) come from it rather than mmaps of their own.
  const int pad = bytes > (size_t{1} << 30) ? 1 << 30 : static_cast<int>(bytes);
  // The threads the work starts (a lexer's and a canonicalizer's, compiler/hlo) allocate from
  // this heap too, rather than from arenas of their own that start small and fault in 4 KiB at
  // a time (a fresh `hlocache key` of a 4 MB module: about 950 page faults with them, 400
  // without).
  ::mallopt(M_ARENA_MAX, 1);
  ::mallopt(M_MMAP_THRESHOLD, std::min(pad, 32 << 20));
  ::mallopt(M_TOP_PAD, pad);
  ::mallopt(M_TRIM_THRESHOLD, pad);
  // An allocation larger than every free block of the heap (all of them together) can only come
  // from its top, which it grows now, by the rest plus the pad; the new end of the heap is then
  // sbrk(0). The C library writes the header of the new free top right after that allocation,
  // before the advice: the 2 MiB around that write would stay in small pages for good, so the
  // advice starts past it. (A probe of 2 MiB, advised from its start, put that write inside the
  // first range advised, where a module's text is read next: 500 page faults of 4 KiB for
  // `hlocache key` on a 4 MB module, 300 to 700 more a key than without.)
  constexpr size_t kPastTop = 64;
  const size_t request = ::mallinfo2().fordblks + kPastTop;
  void* probe = std::malloc(request);
  if (probe == nullptr) return;
  char* const untouched = static_cast<char*>(probe) + request + kPastTop;  // Past that header.
  char* const end = static_cast<char*>(::sbrk(0));
  if (end != reinterpret_cast<char*>(-1) && end > untouched) {
    AdviseHugePages(untouched, static_cast<size_t>(end - untouched));
  }
  std::free(probe);
}

}  // namespace hlocache
