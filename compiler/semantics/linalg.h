// cholesky and triangular-solve on dense row-major matrices of doubles: the arithmetic of both
// ops, written once in HLOCACHE_LINALG_CODE. The reference interpreter compiles it (in
// namespace hlocache::interp::linalg) and the code generator pastes its text (kLinalgSource) into
// the prelude of every generated unit, so that the two compute the same, step for step. Callers
// convert each batch to double, call these, and round each result once to its element type.
//
//   hc_cholesky(a, n, lower): a (n x n) becomes the factor L with A = L L^T (lower), or U with
//     A = U^T U (upper), in that triangle, and zeros in the other. Only that triangle of A is
//     read. Where A is not positive definite, a square root of a negative number gives NaN, and
//     every element computed from it is NaN, as in XLA.
//   hc_triangular_solve(a, b, rows, cols, left, lower, unit, transpose): b (rows x cols) becomes
//     x with op(A) x = B (left) or x op(A) = B (right), op(A) = A or its transpose; A is m x m
//     (m = rows when left, cols when right), only its lower (or upper) triangle read, and its
//     diagonal taken as ones when unit.
//
// Sums run in index order; no fused multiply-add (the generated code is compiled with
// -ffp-contract=off).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

// clang-format off
#define HLOCACHE_LINALG_CODE                                                                    \
  inline void hc_transpose_square(double* a, int64_t n) {                                       \
    for (int64_t i = 0; i < n; ++i) {                                                          \
      for (int64_t j = i + 1; j < n; ++j) {                                                    \
        const double t = a[i * n + j];                                                         \
        a[i * n + j] = a[j * n + i];                                                           \
        a[j * n + i] = t;                                                                      \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  inline void hc_cholesky(double* a, int64_t n, bool lower) {                                  \
    /* The upper factor of A is the transpose of the lower one of A's transpose. */           \
    if (!lower) hc_transpose_square(a, n);                                                     \
    for (int64_t j = 0; j < n; ++j) {                                                          \
      double s = a[j * n + j];                                                                 \
      for (int64_t k = 0; k < j; ++k) s -= a[j * n + k] * a[j * n + k];                        \
      const double d = std::sqrt(s);                                                           \
      a[j * n + j] = d;                                                                        \
      for (int64_t i = j + 1; i < n; ++i) {                                                    \
        double t = a[i * n + j];                                                               \
        for (int64_t k = 0; k < j; ++k) t -= a[i * n + k] * a[j * n + k];                      \
        a[i * n + j] = t / d;                                                                  \
      }                                                                                        \
      for (int64_t i = 0; i < j; ++i) a[i * n + j] = 0;                                        \
    }                                                                                          \
    if (!lower) hc_transpose_square(a, n);                                                     \
  }                                                                                            \
  inline void hc_triangular_solve(const double* a, double* b, int64_t rows, int64_t cols,      \
                                  bool left, bool lower, bool unit, bool transpose) {          \
    const int64_t m = left ? rows : cols;                                                      \
    /* t = op(A); it is lower triangular when exactly one of lower and transpose holds. */    \
    auto t = [&](int64_t i, int64_t j) { return transpose ? a[j * m + i] : a[i * m + j]; };    \
    const bool t_lower = lower != transpose;                                                   \
    if (left) {                                                                                \
      /* Column by column, t x = b: forward substitution when t is lower, else backward. */   \
      for (int64_t c = 0; c < cols; ++c) {                                                     \
        for (int64_t s = 0; s < m; ++s) {                                                      \
          const int64_t i = t_lower ? s : m - 1 - s;                                           \
          double v = b[i * cols + c];                                                          \
          if (t_lower) {                                                                       \
            for (int64_t k = 0; k < i; ++k) v -= t(i, k) * b[k * cols + c];                    \
          } else {                                                                             \
            for (int64_t k = i + 1; k < m; ++k) v -= t(i, k) * b[k * cols + c];                \
          }                                                                                    \
          b[i * cols + c] = unit ? v : v / t(i, i);                                            \
        }                                                                                      \
      }                                                                                        \
    } else {                                                                                   \
      /* Row by row, x t = b: x_j = (b_j - sum over k != j of x_k t(k, j)) / t(j, j), from    \
         the last column when t is lower, else from the first. */                             \
      for (int64_t r = 0; r < rows; ++r) {                                                     \
        double* x = b + r * cols;                                                              \
        for (int64_t s = 0; s < m; ++s) {                                                      \
          const int64_t j = t_lower ? m - 1 - s : s;                                           \
          double v = x[j];                                                                     \
          if (t_lower) {                                                                       \
            for (int64_t k = j + 1; k < m; ++k) v -= x[k] * t(k, j);                           \
          } else {                                                                             \
            for (int64_t k = 0; k < j; ++k) v -= x[k] * t(k, j);                               \
          }                                                                                    \
          x[j] = unit ? v : v / t(j, j);                                                       \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }
// clang-format on

#define HLOCACHE_LINALG_STRINGIFY(...) #__VA_ARGS__
#define HLOCACHE_LINALG_TEXT(...) HLOCACHE_LINALG_STRINGIFY(__VA_ARGS__)

namespace hlocache::compiler {

// HLOCACHE_LINALG_CODE as source text, for the prelude of generated code.
inline constexpr const char* kLinalgSource = HLOCACHE_LINALG_TEXT(HLOCACHE_LINALG_CODE);

}  // namespace hlocache::compiler
