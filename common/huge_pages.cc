#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace hlocache {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

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

}  // namespace hlocache
