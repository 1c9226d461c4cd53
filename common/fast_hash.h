// XXH3 with the widest vector unit this CPU has.
//
// Debian's libxxhash exports two builds of each XXH3 function: the plain one, compiled for the
// x86-64 baseline (SSE2, about 10 GB/s), and a *_dispatch one that picks AVX2 or AVX-512 at run
// time (several times faster on long inputs). Including this header instead of <xxhash.h> makes
// XXH3_64bits, XXH3_128bits and their _update functions the dispatch ones. The results are
// identical: only the speed differs.
//
// The dispatch code returns with the upper halves of the vector registers in use (no
// vzeroupper). Until something clears them, every SSE instruction of the process, that is
// everything built for the x86-64 baseline (LevelDB, libstdc++, the interpreter, this project),
// runs several times slower: a 512^3 dot in the interpreter took 195 ms after one hash and
// 27 ms before it. So each call here clears them on its way out.
//
// Thread safety: as libxxhash's functions.
#pragma once

#include <xxhash.h>

#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <xxh_x86dispatch.h>

namespace hlocache::fast_hash_internal {

// vzeroupper, on CPUs that have it (AVX): the dispatch only uses vector registers past SSE's
// where the CPU has them, and elsewhere the instruction would not exist.
inline void ClearUpperVectorState() {
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) {
    asm volatile("vzeroupper" ::
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
  }
}

inline XXH64_hash_t Hash64(const void* data, size_t size) {
  const XXH64_hash_t h = XXH3_64bits_dispatch(data, size);
  ClearUpperVectorState();
  return h;
}
inline XXH128_hash_t Hash128(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits_dispatch(data, size);
  ClearUpperVectorState();
  return h;
}
inline XXH_errorcode Update64(XXH3_state_t* state, const void* data, size_t size) {
  const XXH_errorcode e = XXH3_64bits_update_dispatch(state, data, size);
  ClearUpperVectorState();
  return e;
}
inline XXH_errorcode Update128(XXH3_state_t* state, const void* data, size_t size) {
  const XXH_errorcode e = XXH3_128bits_update_dispatch(state, data, size);
  ClearUpperVectorState();
  return e;
}

}  // namespace hlocache::fast_hash_internal

#undef XXH3_64bits
#undef XXH3_128bits
#undef XXH3_64bits_update
#undef XXH3_128bits_update
#define XXH3_64bits ::hlocache::fast_hash_internal::Hash64
#define XXH3_128bits ::hlocache::fast_hash_internal::Hash128
#define XXH3_64bits_update ::hlocache::fast_hash_internal::Update64
#define XXH3_128bits_update ::hlocache::fast_hash_internal::Update128
#endif

namespace hlocache {

// A 128-bit digest as 32 lowercase hex digits, high half first.
// Written digit by digit: the server writes a checksum into every hit's headers, and snprintf
// was a visible part of a small hit's time.
inline std::string Hex128(XXH128_hash_t h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(32, '0');
  for (int i = 0; i < 16; ++i) {
    hex[15 - i] = kDigits[(h.high64 >> (4 * i)) & 0xf];
    hex[31 - i] = kDigits[(h.low64 >> (4 * i)) & 0xf];
  }
  return hex;
}

// The XXH3-128 of `size` bytes at `data`, as Hex128 writes it.
inline std::string Hex128(const void* data, size_t size) {
  return Hex128(XXH3_128bits(data, size));
}

}  // namespace hlocache
