// BLAS for generated CPU executables, provided by the loader as XLA's CPU runtime provides its
// functions: an executable never links a BLAS library in. One whose f32 dots may call BLAS
// defines the symbol kBlasRuntimeSymbol (a pointer, null when built); the loader finds a CBLAS
// library on this host (OpenBLAS, else the system's libblas.so.3; HLOCACHE_BLAS_LIBRARY names
// another), points the symbol at the functions below, and refuses to load the executable with
// a one-line reason where there is none.
//
// Thread safety: BlasRuntime() may be called from any thread; the library is opened once per
// process and kept open. The functions it returns may be called from any thread.
#pragma once

#include <cstdint>

#include "common/status.h"

extern "C" {

// The functions an executable calls, field for field as the generated prelude declares them
// (compiler/codegen/prelude/hc_cpu_contractions.h).
struct hlocache_blas {
  // C = A x B, row-major, A m x k (its transpose when trans_a), B k x n (its transpose when
  // trans_b), C m x n, on `threads` threads at most. Returns 0, or 1 when the sizes are beyond
  // what the library takes (32-bit integers): the caller computes the product itself.
  int (*sgemm)(int threads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
};

}  // extern "C"

namespace hlocache::compiler {

// The symbol of an executable that asks for BLAS: `const hlocache_blas* hlocache_blas_runtime`.
inline constexpr const char* kBlasRuntimeSymbol = "hlocache_blas_runtime";

// This process's BLAS: kFailedPrecondition, naming the libraries tried, where none loads or
// one lacks cblas_sgemm.
Result<const hlocache_blas*> BlasRuntime();

}  // namespace hlocache::compiler
