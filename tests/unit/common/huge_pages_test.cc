// PrepareHeapForHugePages (common/huge_pages.h), in a child process of its own since it changes
// the C library's allocator for the whole process: the heap grows at once by what was asked,
// the kernel is asked for huge pages on it, and allocations adding up to that much come from it
// without growing it again.
#include "common/huge_pages.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace hlocache {
namespace {

// Whether a mapping of the heap carries the huge-page advice ("hg" among its VmFlags).
bool HeapAdvisedHugePages() {
  std::ifstream smaps("/proc/self/smaps");
  bool in_heap = false;
  for (std::string line; std::getline(smaps, line);) {
    const std::string first = line.substr(0, line.find(' '));
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos) {
      in_heap = line.ends_with("[heap]");
    } else if (in_heap && line.starts_with("VmFlags:") && line.find(" hg") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Whether `p` lies in the C library's main heap (the `[heap]` mapping, which its brk grows),
// rather than in an arena mapped apart.
bool InHeap(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    if (!line.ends_with("[heap]")) continue;
    const uintptr_t begin = std::strtoull(line.c_str(), nullptr, 16);
    const uintptr_t end = std::strtoull(line.c_str() + line.find('-') + 1, nullptr, 16);
    if (at >= begin && at < end) return true;
  }
  return false;
}

// Resident kilobytes of the heap's mappings that carry the huge-page advice; -1 when none does.
long AdvisedHeapResidentKb() {
  std::ifstream smaps("/proc/self/smaps");
  bool in_heap = false;
  long rss = 0;
  long total = -1;
  for (std::string line; std::getline(smaps, line);) {
    const std::string first = line.substr(0, line.find(' '));
    if (first.find('-') != std::string::npos && first.find(':') == std::string::npos) {
      in_heap = line.ends_with("[heap]");
    } else if (in_heap && line.starts_with("Rss:")) {
      rss = std::strtol(line.c_str() + 4, nullptr, 10);
    } else if (in_heap && line.starts_with("VmFlags:") && line.find(" hg") != std::string::npos) {
      total = (total < 0 ? 0 : total) + rss;
    }
  }
  return total;
}

// Exit statuses of the child: 0 when every expectation held.
int PrepareAndCheck() {
  constexpr size_t kBytes = size_t{64} << 20;
  char* const before = static_cast<char*>(::sbrk(0));
  PrepareHeapForHugePages(kBytes);
  char* const after = static_cast<char*>(::sbrk(0));
  // At least kBytes free at the top of the heap (what it had there before counts).
  if (after <= before || ::mallinfo2().keepcost < kBytes) return 2;
  if (!HeapAdvisedHugePages()) return 3;
  // 40 MB in small pieces, then large blocks that would have had mmaps of their own: all from
  // the grown heap, which does not grow again.
  std::vector<void*> blocks;
  for (int i = 0; i < 500000; ++i) blocks.push_back(std::malloc(64));
  for (int i = 0; i < 4; ++i) {
    char* const large = static_cast<char*>(std::malloc(size_t{4} << 20));
    if (large == nullptr || large < before || large >= after) return 5;
    blocks.push_back(large);
  }
  for (void* b : blocks) {
    if (b == nullptr) return 4;
  }
  if (static_cast<char*>(::sbrk(0)) != after) return 6;
  for (void* b : blocks) std::free(b);
  return 0;
}

TEST(HugePagesTest, APreparedHeapGrowsOnceWithHugePageAdviceAndServesTheAllocations) {
  if (!HeapPreparable()) GTEST_SKIP() << "AddressSanitizer's allocator replaces the C library's";
  EXPECT_EXIT(::_exit(PrepareAndCheck()), ::testing::ExitedWithCode(0), "");
}

// The kernel backs 2 MiB with a huge page at the first touch only if no 4 KiB page of it was
// touched before: a page the preparation itself wrote there before advising (the C library's
// header of the free top, past a 2 MiB probe) left that range in small pages for good, and a
// module's text read into it faulted 500 pages of 4 KiB.
TEST(HugePagesTest, NothingOfTheAdvisedHeapIsTouchedBeforeItsFirstAllocation) {
  if (!HeapPreparable()) GTEST_SKIP() << "AddressSanitizer's allocator replaces the C library's";
  EXPECT_EXIT(
      {
        PrepareHeapForHugePages(size_t{64} << 20);
        ::_exit(AdvisedHeapResidentKb() == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// The threads a command starts to parse (a lexer's, a canonicalizer's) allocate from the
// prepared heap too, not from an arena of their own in small pages.
TEST(HugePagesTest, ThreadsStartedAfterwardsAllocateFromThePreparedHeap) {
  if (!HeapPreparable()) GTEST_SKIP() << "AddressSanitizer's allocator replaces the C library's";
  EXPECT_EXIT(
      {
        PrepareHeapForHugePages(size_t{64} << 20);
        char* const after = static_cast<char*>(::sbrk(0));
        char* small = nullptr;
        char* large = nullptr;
        std::thread([&] {
          small = static_cast<char*>(std::malloc(64));
          large = static_cast<char*>(std::malloc(size_t{4} << 20));
        }).join();
        ::_exit(InHeap(small) && InHeap(large) && after == static_cast<char*>(::sbrk(0)) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(HugePagesTest, SmallRequestsLeaveTheHeapAlone) {
  EXPECT_EXIT(
      {
        char* const before = static_cast<char*>(::sbrk(0));
        PrepareHeapForHugePages(4096);
        ::_exit(static_cast<char*>(::sbrk(0)) == before ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hlocache
