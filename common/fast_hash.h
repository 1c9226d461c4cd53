// XXH3 with the widest vector unit this CPU has.
//
// Debian's libxxhash exports two builds of each XXH3 function: the plain one, compiled for the
// x86-64 baseline (SSE2, about 10 GB/s), and a *_dispatch one that picks AVX2 or AVX-512 at run
// time (several times faster on long inputs). xxh_x86dispatch.h redirects the plain names to the
// dispatch ones, so including this header instead of <xxhash.h> gives every checksum over an
// artifact or a module the fast path. The results are identical: only the speed differs.
#pragma once

#include <xxhash.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <xxh_x86dispatch.h>
#endif
