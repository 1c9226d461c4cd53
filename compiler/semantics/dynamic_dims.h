// The runtime dimensions of arrays of bounded dynamic shapes (f32[<=8,3]), written once in
// HLOCACHE_DYNAMIC_DIMS_CODE: the reference interpreter compiles it (in namespace
// hlocache::interp::dynamic) and the code generator pastes its text (kDynamicDimsSource) into
// the prelude of every generated unit, so that both give a value the same dimensions.
//
//   hc_clamp_dim(v, bound): v within [0, bound]. Runtime sizes from outside the program (an
//     argument's, set-dimension-size's, dynamic-reshape's) are clamped so, never trusted.
//   hc_reshaped_dims(...): reshape's result dimensions. A static result dimension is its bound.
//     With one dynamic result dimension it is the operand's runtime element count over the
//     product of the others; with several, the k-th takes the runtime size of the operand's
//     k-th dynamic dimension (its bound when there is none); each clamped to its bound.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

// clang-format off
#define HLOCACHE_DYNAMIC_DIMS_CODE                                                              \
  inline int64_t hc_clamp_dim(int64_t v, int64_t bound) {                                      \
    return v < 0 ? 0 : v > bound ? bound : v;                                                  \
  }                                                                                            \
  inline void hc_reshaped_dims(const int64_t* in_dims, const bool* in_dynamic,                  \
                               int64_t in_rank, const int64_t* out_bounds,                      \
                               const bool* out_dynamic, int64_t out_rank, int64_t* out_dims) {  \
    int64_t count = 1, dynamic = 0, rest = 1;                                                  \
    for (int64_t k = 0; k < in_rank; ++k) count *= in_dims[k];                                 \
    for (int64_t k = 0; k < out_rank; ++k) {                                                   \
      if (out_dynamic[k]) ++dynamic;                                                           \
      else rest *= out_bounds[k];                                                              \
    }                                                                                          \
    int64_t next = 0;                                                                          \
    for (int64_t k = 0; k < out_rank; ++k) {                                                   \
      if (!out_dynamic[k]) {                                                                   \
        out_dims[k] = out_bounds[k];                                                           \
      } else if (dynamic == 1) {                                                               \
        out_dims[k] = hc_clamp_dim(rest == 0 ? 0 : count / rest, out_bounds[k]);               \
      } else {                                                                                 \
        while (next < in_rank && !in_dynamic[next]) ++next;                                    \
        out_dims[k] = hc_clamp_dim(next < in_rank ? in_dims[next++] : out_bounds[k],           \
                                   out_bounds[k]);                                             \
      }                                                                                        \
    }                                                                                          \
  }
// clang-format on

#define HLOCACHE_DYNAMIC_DIMS_STRINGIFY(...) #__VA_ARGS__
#define HLOCACHE_DYNAMIC_DIMS_TEXT(...) HLOCACHE_DYNAMIC_DIMS_STRINGIFY(__VA_ARGS__)

namespace hlocache::compiler {

// HLOCACHE_DYNAMIC_DIMS_CODE as source text, for the prelude of generated code.
inline constexpr const char* kDynamicDimsSource =
    HLOCACHE_DYNAMIC_DIMS_TEXT(HLOCACHE_DYNAMIC_DIMS_CODE);

}  // namespace hlocache::compiler
