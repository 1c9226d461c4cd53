// BLAS (and oneDNN's convolutions) for generated CPU executables, provided by the loader as XLA's
// CPU runtime provides its functions: an executable never links either library in. One whose f32
// dots and convolutions may call them defines the symbol kBlasRuntimeSymbol (a pointer, null when
// built); the loader finds a CBLAS library on this host (OpenBLAS, else the system's
// libblas.so.3; HLOCACHE_BLAS_LIBRARY names another), points the symbol at the functions below,
// and refuses to load the executable with a one-line reason where there is none. oneDNN is
// optional: where the host has none, `conv` declines and the executable convolves by BLAS.
//
// Thread safety: BlasRuntime() may be called from any thread; the library is opened once per
// process and kept open. The functions it returns may be called from any thread.
#pragma once

#include <cstdint>

#include "common/status.h"

extern "C" {

// A convolution as the generated code describes it, field for field as the prelude declares
// hc_conv_dim and hc_conv_spec (compiler/codegen/prelude/hc_cpu_contractions.h): strides are in
// elements of each array, one entry of `dims` per spatial dimension of the window.
struct hlocache_conv_dim {
  int64_t in_extent, in_stride, size, kernel_stride, out_extent, out_stride;
  int64_t stride, pad_low, base_dilation, window_dilation, reversed;
};
struct hlocache_conv_spec {
  int64_t spatial, out_batch, groups, feature_grouped, batch_grouped;
  int64_t kernel_in_features, outputs_per_group;
  int64_t in_batch_stride, in_feature_stride, kernel_in_stride, kernel_out_stride;
  int64_t out_batch_stride, out_feature_stride;
  const hlocache_conv_dim* dims;
};

// The functions an executable calls, field for field as the generated prelude declares them
// (compiler/codegen/prelude/hc_cpu_contractions.h).
struct hlocache_blas {
  // C = A x B, row-major, A m x k (its transpose when trans_a), B k x n (its transpose when
  // trans_b), C m x n, on `threads` threads at most. Returns 0, or 1 when the sizes are beyond
  // what the library takes (32-bit integers): the caller computes the product itself.
  int (*sgemm)(int threads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
  // The f32 convolution `spec` describes, of `lhs` by `rhs` into every element of `out`, on
  // `threads` threads at most, by oneDNN (compiler/artifact/conv_runtime.h). Returns 0, or 1
  // with `out` in an unspecified state where the host has no oneDNN or it does not take this
  // convolution (the caller computes it itself).
  int (*conv)(int threads, const hlocache_conv_spec* spec, const float* lhs, const float* rhs,
              float* out);
};

}  // extern "C"

namespace hlocache::compiler {

// The symbol of an executable that asks for BLAS: `const hlocache_blas* hlocache_blas_runtime`.
inline constexpr const char* kBlasRuntimeSymbol = "hlocache_blas_runtime";

// This process's BLAS: kFailedPrecondition, naming the libraries tried, where none loads or
// one lacks cblas_sgemm.
Result<const hlocache_blas*> BlasRuntime();

}  // namespace hlocache::compiler
