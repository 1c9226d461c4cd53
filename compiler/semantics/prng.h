// Counter-based random bit generators for rng-bit-generator, rng and rng-get-and-update-state:
// ThreeFry-2x32 (20 rounds) and Philox-4x32 (10 rounds), with the state layouts, counters and
// output orders of XLA's RngBitGeneratorExpander and prng library, so that a given state gives
// XLA's bits.
//
// The code is written once, in HLOCACHE_PRNG_CODE: the reference interpreter compiles it (in
// namespace hlocache::interp::prng) and the code generator pastes its text (kPrngSource) into
// the prelude of every generated unit, so the two cannot drift apart.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "compiler/hlo/shape.h"

// clang-format off
#define HLOCACHE_PRNG_CODE                                                                      \
  /* ThreeFry-2x32 of the counter (x0, x1) under the key (k0, k1). */                         \
  inline void hc_threefry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {         \
    const uint32_t k2 = 0x1BD11BDAu ^ k0 ^ k1;                                                 \
    const uint32_t ks[3] = {k0, k1, k2};                                                       \
    const int rotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};                                  \
    x0 += k0;                                                                                  \
    x1 += k1;                                                                                  \
    for (int block = 0; block < 5; ++block) {                                                  \
      for (int r = 0; r < 4; ++r) {                                                            \
        const int d = rotations[(block % 2) * 4 + r];                                          \
        x0 += x1;                                                                              \
        x1 = (x1 << d) | (x1 >> (32 - d));                                                     \
        x1 ^= x0;                                                                              \
      }                                                                                        \
      x0 += ks[(block + 1) % 3];                                                               \
      x1 += ks[(block + 2) % 3] + static_cast<uint32_t>(block + 1);                            \
    }                                                                                          \
  }                                                                                            \
  /* Philox-4x32 of the counter x[0..3] (least significant word first) under (k0, k1). */     \
  inline void hc_philox4x32(uint32_t k0, uint32_t k1, uint32_t* x) {                           \
    for (int round = 0; round < 10; ++round) {                                                 \
      const uint64_t p0 = static_cast<uint64_t>(x[0]) * 0xD2511F53u;                           \
      const uint64_t p1 = static_cast<uint64_t>(x[2]) * 0xCD9E8D57u;                           \
      const uint32_t y[4] = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k0,                      \
                             static_cast<uint32_t>(p1),                                        \
                             static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k1,                      \
                             static_cast<uint32_t>(p0)};                                       \
      x[0] = y[0]; x[1] = y[1]; x[2] = y[2]; x[3] = y[3];                                      \
      k0 += 0x9E3779B9u;                                                                       \
      k1 += 0xBB67AE85u;                                                                       \
    }                                                                                          \
  }                                                                                            \
  /* rng-bit-generator: `n` values of `bits` bits (8, 16, 32 or 64; narrower values are the */ \
  /* low bits of 32-bit ones) of an array of dimensions dims[0..rank), into out (zero- */       \
  /* extended), and the state after them. algorithm: 1 ThreeFry (state: key, counter, */      \
  /* others kept), 2 Philox (state: key, then the 128-bit counter low word first when the */  \
  /* state has 3 words or more, else the key and the counter's low word read backwards). */   \
  inline void hc_rng_bits(int algorithm, const uint64_t* state, int64_t state_size,            \
                          uint64_t* new_state, int bits, const int64_t* dims, int64_t rank,   \
                          uint64_t* out) {                                                     \
    int64_t n = 1;                                                                             \
    for (int64_t d = 0; d < rank; ++d) n *= dims[d];                                           \
    for (int64_t s = 0; s < state_size; ++s) new_state[s] = state[s];                          \
    const uint64_t key = state[0];                                                             \
    const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);     \
    if (algorithm == 1) {                                                                      \
      const uint64_t counter = state[1];                                                       \
      if (bits == 64) {                                                                        \
        for (int64_t j = 0; j < n; ++j) {                                                      \
          const uint64_t c = counter + static_cast<uint64_t>(j);                               \
          uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32);         \
          hc_threefry2x32(k0, k1, x0, x1);                                                     \
          out[j] = x0 | (static_cast<uint64_t>(x1) << 32);                                     \
        }                                                                                      \
        new_state[1] = counter + static_cast<uint64_t>(n);                                     \
        return;                                                                                \
      }                                                                                        \
      /* Halves along the first even dimension (else the first longest): half element h */   \
      /* gives the two outputs 2h and 2h + 1 along it. A scalar is half of a pair. */         \
      int64_t split = -1;                                                                      \
      for (int64_t d = 0; d < rank && split < 0; ++d) {                                        \
        if (dims[d] % 2 == 0) split = d;                                                       \
      }                                                                                        \
      for (int64_t d = 0; d < rank && split < 0; ++d) {                                        \
        bool longest = true;                                                                   \
        for (int64_t e = 0; e < rank; ++e) longest = longest && dims[e] <= dims[d];            \
        if (longest) split = d;                                                                \
      }                                                                                        \
      int64_t halves = 1, inner = 1;                                                           \
      for (int64_t d = 0; d < rank; ++d) halves *= d == split ? (dims[d] + 1) / 2 : dims[d];   \
      for (int64_t d = split + 1; d < rank; ++d) inner *= dims[d];                             \
      const int64_t extent = rank > 0 ? dims[split] : 1;                                       \
      const int64_t half_extent = (extent + 1) / 2;                                            \
      for (int64_t h = 0; h < halves; ++h) {                                                   \
        const uint64_t c = counter + static_cast<uint64_t>(h);                                 \
        uint32_t x[2] = {static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)};            \
        hc_threefry2x32(k0, k1, x[0], x[1]);                                                   \
        const int64_t along = (h / inner) % half_extent, outer = h / inner / half_extent;     \
        for (int64_t part = 0; part < 2; ++part) {                                             \
          const int64_t at = 2 * along + part;                                                 \
          if (at >= extent) continue;                                                          \
          const uint64_t v = bits == 32 ? x[part] : x[part] & ((uint64_t{1} << bits) - 1);    \
          out[(outer * extent + at) * inner + h % inner] = v;                                  \
        }                                                                                      \
      }                                                                                        \
      new_state[1] = counter + static_cast<uint64_t>(halves);                                  \
      return;                                                                                  \
    }                                                                                          \
    const bool wide = state_size >= 3;                                                         \
    const uint64_t low = state[1], high = wide ? state[2] : state[0];                          \
    const int64_t words = bits == 64 ? 2 * n : n;                                              \
    const int64_t blocks = (words + 3) / 4;                                                    \
    for (int64_t j = 0; j < blocks; ++j) {                                                     \
      const uint64_t lo = low + static_cast<uint64_t>(j);                                      \
      const uint64_t hi = lo < low ? high + 1 : high;                                          \
      uint32_t x[4] = {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),             \
                       static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32)};            \
      hc_philox4x32(k0, k1, x);                                                                \
      if (bits == 64) {                                                                        \
        for (int64_t part = 0; part < 2 && 2 * j + part < n; ++part) {                         \
          out[2 * j + part] = x[2 * part] | (static_cast<uint64_t>(x[2 * part + 1]) << 32);   \
        }                                                                                      \
      } else {                                                                                 \
        for (int64_t part = 0; part < 4 && 4 * j + part < n; ++part) {                         \
          out[4 * j + part] = bits == 32 ? x[part] : x[part] & ((uint64_t{1} << bits) - 1);   \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    const uint64_t next = low + static_cast<uint64_t>(blocks);                                 \
    new_state[1] = next;                                                                       \
    if (wide) new_state[2] = next < low ? high + 1 : high;                                     \
  }                                                                                            \
  /* The state of a stateful random op (rng, rng-get-and-update-state): its 128-bit */        \
  /* counter, returned in old[0..1] (low word first) and advanced by `delta`, under a lock */  \
  /* (executables may run on several threads at once). */                                    \
  inline void hc_rng_advance(uint64_t* state, bool* lock, uint64_t delta, uint64_t* old) {     \
    while (__atomic_test_and_set(lock, __ATOMIC_ACQUIRE)) {                                    \
    }                                                                                          \
    old[0] = state[0];                                                                         \
    old[1] = state[1];                                                                         \
    state[0] += delta;                                                                         \
    if (state[0] < old[0]) ++state[1];                                                         \
    __atomic_clear(lock, __ATOMIC_RELEASE);                                                    \
  }                                                                                            \
  /* rng's uniform distribution on [0, 1): the top `mantissa` of `bits` random bits as a */    \
  /* binary fraction (exact in double). */                                                     \
  inline double hc_rng_unit(uint64_t v, int bits, int mantissa) {                              \
    return static_cast<double>(v >> (bits - mantissa)) /                                       \
           static_cast<double>(uint64_t{1} << mantissa);                                       \
  }                                                                                            \
  /* rng's normal distribution: the Box-Muller transform of two uniform values. */            \
  inline void hc_rng_normal(double x0, double x1, double& z0, double& z1) {                    \
    const double u1 = x0 < 1e-7 ? 1e-7 : x0;                                                   \
    const double v1 = 6.283185307179586 * x1;                                                  \
    const double u2 = std::sqrt(-2.0 * std::log(u1));                                          \
    z0 = std::sin(v1) * u2;                                                                    \
    z1 = std::cos(v1) * u2;                                                                    \
  }
// clang-format on

#define HLOCACHE_PRNG_STRINGIFY(...) #__VA_ARGS__
#define HLOCACHE_PRNG_TEXT(...) HLOCACHE_PRNG_STRINGIFY(__VA_ARGS__)

namespace hlocache::compiler {

// HLOCACHE_PRNG_CODE as source text, for the prelude of generated code.
inline constexpr const char* kPrngSource = HLOCACHE_PRNG_TEXT(HLOCACHE_PRNG_CODE);

// rng-bit-generator's algorithm attribute as hc_rng_bits takes it: 1 ThreeFry, 2 Philox
// (rng_default, as on XLA's CPU and GPU backends, and no attribute), 0 for any other.
inline int RngAlgorithm(std::string_view attribute) {
  if (attribute.empty() || attribute == "rng_default" || attribute == "rng_philox") return 2;
  return attribute == "rng_three_fry" ? 1 : 0;
}

// The width of the random words rng draws for an element of `type`, and the mantissa bits of
// a float (0 for integers); false for the types rng does not make.
inline bool RngWords(hlo::PrimitiveType type, int& bits, int& mantissa) {
  switch (type) {
    case hlo::PrimitiveType::kF16:
      bits = 16, mantissa = 10;
      return true;
    case hlo::PrimitiveType::kBF16:
      bits = 16, mantissa = 7;
      return true;
    case hlo::PrimitiveType::kF32:
      bits = 32, mantissa = 23;
      return true;
    case hlo::PrimitiveType::kF64:
      bits = 64, mantissa = 52;
      return true;
    case hlo::PrimitiveType::kS32:
    case hlo::PrimitiveType::kU32:
      bits = 32, mantissa = 0;
      return true;
    case hlo::PrimitiveType::kS64:
    case hlo::PrimitiveType::kU64:
      bits = 64, mantissa = 0;
      return true;
    default:
      return false;
  }
}

}  // namespace hlocache::compiler
