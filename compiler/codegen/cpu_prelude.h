// The text every generated CPU unit starts with: compiler/codegen/prelude/hc_cpu.h, then
// hc_cpu_contractions.h (each one's part below its marker line), embedded into the binary at
// build time by compiler/embed_preludes.cmake (that file says what the prelude holds and why),
// then, inside namespace hlocache_rt, the code shared with the interpreter
// (compiler/semantics/prng.h, linalg.h, dynamic_dims.h) with the helpers below after the parts they
// build on.
#pragma once

namespace hlocache::compiler {

// NUL-terminated; static storage.
extern const char* const kCpuPrelude;

// cholesky and triangular-solve over batches (compiler/semantics/linalg.h), to follow the linear
// algebra's source in the hlocache_rt namespace: each batch in double, each result rounded once.
// They return false when out of memory.
inline constexpr const char* kCpuLinalgPrelude = R"(
template <class T>
bool hc_cholesky_batches(const T* a, T* out, int64_t batches, int64_t n, bool lower) {
  std::unique_ptr<double[]> m(new (std::nothrow) double[n * n > 0 ? n * n : 1]);
  if (!m) return false;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < n * n; ++i) m[i] = hc_load(a[b * n * n + i]);
    hc_cholesky(m.get(), n, lower);
    for (int64_t i = 0; i < n * n; ++i) out[b * n * n + i] = hc_store<T>(m[i]);
  }
  return true;
}
template <class T>
bool hc_triangular_solve_batches(const T* a, const T* b, T* out, int64_t batches, int64_t rows,
                                 int64_t cols, bool left, bool lower, bool unit, bool transpose) {
  const int64_t m = left ? rows : cols;
  std::unique_ptr<double[]> am(new (std::nothrow) double[m * m > 0 ? m * m : 1]);
  std::unique_ptr<double[]> bm(new (std::nothrow) double[rows * cols > 0 ? rows * cols : 1]);
  if (!am || !bm) return false;
  for (int64_t k = 0; k < batches; ++k) {
    for (int64_t i = 0; i < m * m; ++i) am[i] = hc_load(a[k * m * m + i]);
    for (int64_t i = 0; i < rows * cols; ++i) bm[i] = hc_load(b[k * rows * cols + i]);
    hc_triangular_solve(am.get(), bm.get(), rows, cols, left, lower, unit, transpose);
    for (int64_t i = 0; i < rows * cols; ++i) out[k * rows * cols + i] = hc_store<T>(bm[i]);
  }
  return true;
}
)";

// Helpers for arrays of dynamic shapes, pasted after the shared code of dynamic_dims.h (they
// clamp with its hc_clamp_dim), inside namespace hlocache_rt.
inline constexpr const char* kCpuDynamicPrelude = R"(
// Arrays of dynamic shapes (compiler/semantics/dynamic_shapes.h): a buffer laid out by the bounds,
// then the sizes as int32s. Reading clamps them to the bounds (hc_clamp_dim, dynamic_dims.h), so
// no size from outside the program can index past a buffer.
inline void hc_dims_get(const void* buffer, int64_t data_bytes, int64_t rank,
                        const int64_t* bounds, int64_t* dims) {
  for (int64_t k = 0; k < rank; ++k) {
    int32_t v;
    std::memcpy(&v, static_cast<const char*>(buffer) + data_bytes + 4 * k, sizeof v);
    dims[k] = hc_clamp_dim(v, bounds[k]);
  }
}
inline void hc_dims_set(void* buffer, int64_t data_bytes, int64_t rank, const int64_t* dims) {
  for (int64_t k = 0; k < rank; ++k) {
    const auto v = static_cast<int32_t>(dims[k]);
    std::memcpy(static_cast<char*>(buffer) + data_bytes + 4 * k, &v, sizeof v);
  }
}
// Element n, in row-major order of out_dims, of `out` (laid out by out_bounds) is element n, in
// row-major order of in_dims, of `in` (laid out by in_bounds); zero past in's last.
template <class T>
void hc_relayout(const T* in, const int64_t* in_bounds, const int64_t* in_dims, int64_t in_rank,
                 T* out, const int64_t* out_bounds, const int64_t* out_dims, int64_t out_rank) {
  int64_t in_count = 1, out_count = 1;
  for (int64_t k = 0; k < in_rank; ++k) in_count *= in_dims[k];
  for (int64_t k = 0; k < out_rank; ++k) out_count *= out_dims[k];
  int64_t in_index[64] = {}, out_index[64] = {};
  for (int64_t n = 0; n < out_count; ++n) {
    int64_t to = 0, from = 0;
    for (int64_t k = 0; k < out_rank; ++k) to = to * out_bounds[k] + out_index[k];
    for (int64_t k = 0; k < in_rank; ++k) from = from * in_bounds[k] + in_index[k];
    out[to] = n < in_count ? in[from] : T{};
    for (int64_t k = out_rank - 1; k >= 0 && ++out_index[k] == out_dims[k]; --k) out_index[k] = 0;
    for (int64_t k = in_rank - 1; k >= 0 && ++in_index[k] == in_dims[k]; --k) in_index[k] = 0;
  }
}
)";

}  // namespace hlocache::compiler
