// Transparent-huge-page advice for large buffers that are about to be filled.
//
// Parsing a multi-megabyte module fills arrays of ten megabytes or more in a process that may
// never have touched that memory. With 4 KiB pages each page costs a fault (expensive in virtual
// machines: microseconds each) and every walk a TLB miss per page. On kernels whose huge-page
// policy is `madvise` (Debian's default), asking for huge pages turns thousands of faults into
// a handful.
//
// Thread safety: stateless. Ownership: the caller keeps the buffer; this only advises the kernel.
#pragma once

#include <cstddef>

namespace hlocache {

// Advises the kernel to back the 2 MiB-aligned interior of [data, data + bytes) with huge pages.
// Buffers that hold no aligned 2 MiB are left alone. Best effort: failures are ignored, since
// the advice only changes speed, never contents.
void AdviseHugePages(const void* data, size_t bytes);

// For a short-lived process about to make many small allocations adding up to about `bytes` (a
// command that parses a large module): grows the C library's heap by that much at once, keeps
// it (no trimming back), and advises huge pages for it, so that those allocations fault their
// memory in 2 MiB at a time instead of 4 KiB; threads started after it allocate from that heap
// too (one arena). Affects the whole process; call it once, from main's thread, before the work
// and before any other thread starts. Best effort, like AdviseHugePages.
void PrepareHeapForHugePages(size_t bytes);

// Whether PrepareHeapForHugePages does anything in this build: false under AddressSanitizer,
// whose allocator replaces the C library's heap.
bool HeapPreparable();

}  // namespace hlocache
