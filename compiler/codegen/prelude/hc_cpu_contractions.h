// The contractions and normalizations of generated CPU units: dot blocks in vector registers,
// convolutions over window positions, batch norm and its gradient. Every generated unit has
// them after the helpers of compiler/codegen/prelude/hc_cpu.h, which they build on (hc_load,
// hc_store, the integer and float rules).
//
// This is real C++, compiled on its own with hc_cpu.h (compiler/codegen/prelude/check.cc), and
// its text below the marker is embedded after hc_cpu.h's into kCpuPrelude
// (compiler/codegen/cpu_prelude.h). Changing it changes generated code: raise kCodegenVersion.
#pragma once

#include "compiler/codegen/prelude/hc_cpu.h"
#include "compiler/codegen/prelude/hc_cpu_threads.h"

// ---- The prelude: every generated unit starts with the text below this line. ----
namespace hlocache_rt {
// Lanes of 8-byte elements in one vector register of the target: blocks of results are two
// registers wide, so that their accumulators stay in registers (a wider vector type than the
// target has is split through memory, 25 times slower).
#if defined(__AVX512F__)
constexpr int64_t hc_lanes = 8;
#elif defined(__AVX__)
constexpr int64_t hc_lanes = 4;
#else
constexpr int64_t hc_lanes = 2;
#endif
// Rows of a dot block: with 32 vector registers (AVX-512), 8 rows x 2 registers of sums; with
// 16, 4 rows.
#if defined(__AVX512F__)
constexpr int64_t hc_rows = 8;
#else
constexpr int64_t hc_rows = 4;
#endif
// One hc_rows x (2 * hc_lanes) block of dot results, summed over all of k in vector registers
// (the loops over rows are unrolled, so every index into `c` is a constant and the array lives
// in registers). The fused version lets the compiler use fused multiply-adds: when both
// operands are narrower than double (or integers), every product is exact in the accumulator's
// type, so rounding it once with the sum changes nothing; for f64 operands it would, and every
// other generated line is compiled with -ffp-contract=off.
#define HC_DOT_BLOCK_BODY                                            \
  V c[hc_rows][2] = {};                                              \
  for (int64_t k = 0; k < K; ++k) {                                  \
    V y0, y1;                                                        \
    std::memcpy(&y0, tile + k * 2 * hc_lanes, sizeof y0);            \
    std::memcpy(&y1, tile + k * 2 * hc_lanes + hc_lanes, sizeof y1); \
    _Pragma("GCC unroll 8") for (int64_t r = 0; r < hc_rows; ++r) {  \
      const Acc xr = x[r * stride + k];                              \
      c[r][0] += xr * y0;                                            \
      c[r][1] += xr * y1;                                            \
    }                                                                \
  }                                                                  \
  _Pragma("GCC unroll 8") for (int64_t r = 0; r < hc_rows; ++r) {    \
    acc[r][0] = c[r][0];                                             \
    acc[r][1] = c[r][1];                                             \
  }
#if defined(__clang__)
#define HC_CONTRACT_FUNCTION
#define HC_CONTRACT_FAST _Pragma("clang fp contract(fast) ")
#else
#define HC_CONTRACT_FUNCTION __attribute__((optimize("fp-contract=fast")))
#define HC_CONTRACT_FAST
#endif
template <class Acc, class V>
HC_CONTRACT_FUNCTION void hc_dot_block_fused(const Acc* tile, const Acc* x, int64_t stride,
                                             int64_t K, V (*acc)[2]) {
  HC_CONTRACT_FAST
  HC_DOT_BLOCK_BODY
}
template <class Acc, class V>
void hc_dot_block(const Acc* tile, const Acc* x, int64_t stride, int64_t K, V (*acc)[2]) {
  HC_DOT_BLOCK_BODY
}
// Whether an operand of element type X, as a dot into T loads it, has a product with any other
// such operand that double holds exactly: narrower floats do; integers are converted to T first.
template <class T, class X>
constexpr bool kExactProducts = kFloat<X> ? !std::is_same_v<X, double> : !std::is_same_v<T, double>;
struct hc_conv_spec;
// BLAS and oneDNN's convolutions, from the loader (compiler/artifact/blas_runtime.h declares the
// same struct, field for field): never linked into an executable. `conv` returns 1 where the
// host has no oneDNN or it does not take the convolution.
struct hc_blas {
  int (*sgemm)(int threads, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
  int (*conv)(int threads, const hc_conv_spec* spec, const float* lhs, const float* rhs,
              float* out);
};
}  // namespace hlocache_rt
// Defined in a module whose f32 dots may call BLAS (schema/numerics.tsv lets them sum in
// another order), and pointed at this host's BLAS by the loader; elsewhere an undefined weak
// reference, whose address is null.
extern "C" __attribute__((weak, visibility("default")))
const hlocache_rt::hc_blas* hlocache_blas_runtime;
namespace hlocache_rt {
// Whether offsets t[0..n) step by one stride, and that stride (0 for fewer than two).
inline bool hc_affine(const int64_t* t, int64_t n, int64_t& stride) {
  stride = n > 1 ? t[1] - t[0] : 0;
  for (int64_t j = 2; j < n; ++j) {
    if (t[j] - t[j - 1] != stride) return false;
  }
  return true;
}
// A rows x cols matrix whose element (r, c) is at r * rs + c * cs, as a row-major BLAS operand:
// as it is (cs 1, leading dimension rs) or transposed (rs 1, leading dimension cs).
inline bool hc_blas_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int& trans,
                            int64_t& ld) {
  if (cols == 1 || cs == 1) {
    ld = rows == 1 ? cols : rs;
    trans = 0;
    if (ld >= cols) return true;
  }
  if (rows == 1 || rs == 1) {
    ld = cols == 1 ? rows : cs;
    trans = 1;
    if (ld >= rows) return true;
  }
  return false;
}
// An f32 dot by the loader's BLAS (sgemm), one call a batch, when the module asked for it and
// each operand is a strided matrix; false, with nothing written, where it is not (hc_dot then
// computes it).
inline bool hc_sgemm(const float* lhs, const float* rhs, float* out, int64_t B, int64_t M,
                     int64_t N, int64_t K, const int64_t* lb, const int64_t* lf, const int64_t* lc,
                     const int64_t* rb, const int64_t* rf, const int64_t* rc) {
  if (&hlocache_blas_runtime == nullptr || hlocache_blas_runtime == nullptr) return false;
  if (M == 0 || N == 0 || K == 0) return false;
  int64_t sm = 0, sk = 0, sn = 0, rk = 0, lda = 0, ldb = 0;
  int ta = 0, tb = 0;
  if (!hc_affine(lf, M, sm) || !hc_affine(lc, K, sk) || !hc_affine(rf, N, sn) ||
      !hc_affine(rc, K, rk) || !hc_blas_operand(M, K, sm, sk, ta, lda) ||
      !hc_blas_operand(K, N, rk, sn, tb, ldb)) {
    return false;
  }
  const int threads = hc_threads_wanted();
  for (int64_t b = 0; b < B; ++b) {
    if (hlocache_blas_runtime->sgemm(threads, ta, tb, M, N, K, lhs + lb[b] + lf[0] + lc[0], lda,
                                     rhs + rb[b] + rf[0] + rc[0], ldb, out + b * M * N, N) != 0) {
      return false;  // Sizes beyond the library's: the first batch, before any is written.
    }
  }
  return true;
}
// dot: out[(b*M + m)*N + n] = sum over k of lhs[lb[b] + lf[m] + lc[k]] * rhs[rb[b] + rf[n] +
// rc[k]], summed from zero in order of k, in double for floats (rounded once) and modulo 2^64 for
// integers, as the interpreter does. Blocked: a panel of rhs columns is packed as Acc once per
// batch, in tiles of kCols (2 * hc_lanes) columns; kRows rows of lhs are packed once per panel;
// each kRows x kCols block of results is summed in vector registers over all of k. An f32 dot of a
// module that asked for BLAS is BLAS's (hc_sgemm) where its operands are strided matrices.
// False when out of memory.
// An element of a dot operand as the sum's type: a float as double (an integer or pred operand
// of a float result converted to the result's type first, as XLA does), an integer modulo 2^64.
template <class T, class X>
auto hc_dot_operand(X x) {
  if constexpr (kFloat<T> && kFloat<X>)
    return hc_load(x);
  else if constexpr (kFloat<T>)
    return hc_load(hc_cvt<T, X>(x));
  else
    return static_cast<uint64_t>(static_cast<int64_t>(x));
}
template <class T, class L, class R>
bool hc_dot(const L* lhs, const R* rhs, T* out, int64_t B, int64_t M, int64_t N, int64_t K,
            const int64_t* lb, const int64_t* lf, const int64_t* lc, const int64_t* rb,
            const int64_t* rf, const int64_t* rc) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<L, float> && std::is_same_v<R, float>) {
    if (hc_sgemm(lhs, rhs, out, B, M, N, K, lb, lf, lc, rb, rf, rc)) return true;
  }
  using Acc = std::conditional_t<kFloat<T>, double, uint64_t>;
  typedef Acc V __attribute__((vector_size(hc_lanes * sizeof(Acc))));  // Half a tile row.
  constexpr int64_t kRows = hc_rows, kCols = 2 * hc_lanes, kPanel = 256;
  auto load = [](auto x) -> Acc { return hc_dot_operand<T>(x); };
  const int64_t k_alloc = K > 0 ? K : 1;
  // A panel no wider than rhs (rounded up to whole tiles): a long contraction with few
  // columns packs only what it has.
  const int64_t panel = std::min(kPanel, (N + kCols - 1) / kCols * kCols);
  hc_temp<Acc> packed(k_alloc * (panel > 0 ? panel : kCols));
  if (!packed) return false;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t p0 = 0; p0 < N; p0 += panel) {
      const int64_t tiles = (std::min(panel, N - p0) + kCols - 1) / kCols;
      // Tile t of the panel is [K][kCols], columns past N zero.
      for (int64_t t = 0; t < tiles; ++t) {
        Acc* tile = &packed[t * k_alloc * kCols];
        for (int64_t k = 0; k < K; ++k) {
          for (int64_t j = 0; j < kCols; ++j) {
            const int64_t n = p0 + t * kCols + j;
            tile[k * kCols + j] = n < N ? load(rhs[rb[b] + rf[n] + rc[k]]) : Acc(0);
          }
        }
      }
      // Blocks of kRows rows of lhs against the whole panel, split across threads: each
      // result is summed on one, as on one thread.
      auto blocks = [&](int64_t lo, int64_t hi) {
        std::unique_ptr<Acc[]> rows(new (std::nothrow) Acc[k_alloc * kRows]);
        if (!rows) return false;
        for (int64_t m0 = lo * kRows; m0 < hi * kRows && m0 < M; m0 += kRows) {
          const int64_t live = std::min(kRows, M - m0);
          for (int64_t r = 0; r < kRows; ++r) {  // Rows past M multiply zeros.
            for (int64_t k = 0; k < K; ++k) {
              rows[r * k_alloc + k] = r < live ? load(lhs[lb[b] + lf[m0 + r] + lc[k]]) : Acc(0);
            }
          }
          for (int64_t t = 0; t < tiles; ++t) {
            const Acc* tile = &packed[t * k_alloc * kCols];
            V acc[kRows][2];
            if constexpr (kExactProducts<T, L> && kExactProducts<T, R>) {
              hc_dot_block_fused<Acc, V>(tile, &rows[0], k_alloc, K, acc);
            } else {
              hc_dot_block<Acc, V>(tile, &rows[0], k_alloc, K, acc);
            }
            const int64_t n0 = p0 + t * kCols, cols = std::min(kCols, N - n0);
            for (int64_t r = 0; r < live; ++r) {
              Acc sums[kCols];
              std::memcpy(sums, &acc[r][0], sizeof(V));
              std::memcpy(sums + hc_lanes, &acc[r][1], sizeof(V));
              T* o = out + (b * M + m0 + r) * N + n0;
              for (int64_t j = 0; j < cols; ++j) {
                if constexpr (kFloat<T>)
                  o[j] = hc_store<T>(sums[j]);
                else
                  o[j] = static_cast<T>(static_cast<int64_t>(sums[j]));
              }
            }
          }
        }
        return true;
      };
      const int64_t macs = kRows * k_alloc * tiles * kCols;  // A block's.
      if (!hc_parallel_body((M + kRows - 1) / kRows, std::max<int64_t>(1, hc_parallel_macs / macs),
                            blocks)) {
        return false;
      }
    }
  }
  return true;
}
// ragged-dot (compiler/interp/eval_dots.cc defines it; compiler/semantics/dot_dims.h its tables):
// dot's sums, each over the contracting positions of its group. The group of ragged position p
// in a row of group sizes, or -1 past the last.
template <class G>
int64_t hc_group_of(const G* row, int64_t groups, int64_t p) {
  int64_t start = 0;
  for (int64_t j = 0; j < groups; ++j) {
    const auto size = static_cast<int64_t>(row[j]);
    if (p >= start && p < start + size) return j;
    start += size;
  }
  return -1;
}
template <class T, class L, class R, class G>
bool hc_ragged_dot(const L* lhs, const R* rhs, const G* sizes, T* out, bool contracting, int64_t B,
                   int64_t M, int64_t N, int64_t K, int64_t groups, int64_t group_stride,
                   const int64_t* lb, const int64_t* lf, const int64_t* lc, const int64_t* rb,
                   const int64_t* rf, const int64_t* rc, const int64_t* gb, const int64_t* outer,
                   const int64_t* position) {
  using Acc = std::conditional_t<kFloat<T>, double, uint64_t>;
  auto put = [&](int64_t at, Acc v) {
    if constexpr (kFloat<T>)
      out[at] = hc_store<T>(v);
    else
      out[at] = static_cast<T>(static_cast<int64_t>(v));
  };
  if (!contracting) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t m = 0; m < M; ++m) {
        const int64_t j = hc_group_of(sizes + gb[b] + outer[m], groups, position[m]);
        for (int64_t n = 0; n < N; ++n) {
          Acc acc = 0;
          for (int64_t k = 0; j >= 0 && k < K; ++k) {
            acc += hc_dot_operand<T>(lhs[lb[b] + lf[m] + lc[k]]) *
                   hc_dot_operand<T>(rhs[j * group_stride + rb[b] + rc[k] + rf[n]]);
          }
          put((b * M + m) * N + n, acc);
        }
      }
    }
    return true;
  }
  std::unique_ptr<int64_t[]> group_of(new (std::nothrow) int64_t[B * K > 0 ? B * K : 1]);
  if (!group_of) return false;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 0; k < K; ++k) {
      group_of[b * K + k] = hc_group_of(sizes + gb[b] + outer[k], groups, position[k]);
    }
  }
  for (int64_t j = 0; j < groups; ++j) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          Acc acc = 0;
          for (int64_t k = 0; k < K; ++k) {
            if (group_of[b * K + k] != j) continue;
            acc += hc_dot_operand<T>(lhs[lb[b] + lf[m] + lc[k]]) *
                   hc_dot_operand<T>(rhs[rb[b] + rc[k] + rf[n]]);
          }
          put(((j * B + b) * M + m) * N + n, acc);
        }
      }
    }
  }
  return true;
}
// An element of a convolution operand as the accumulator's type (pred as 0 or 1; into a pred
// result T, every element as pred).
template <class Acc, class T, class X>
Acc hc_conv_load(X x) {
  if constexpr (std::is_same_v<X, bool>)
    return x ? Acc(1) : Acc(0);
  else if constexpr (std::is_same_v<T, bool> && kFloat<X>)
    return hc_load(x) != 0 ? Acc(1) : Acc(0);
  else if constexpr (std::is_same_v<T, bool>)
    return x != 0 ? Acc(1) : Acc(0);
  else if constexpr (std::is_same_v<Acc, double>)
    return hc_load(x);
  else
    return static_cast<uint64_t>(static_cast<int64_t>(x));
}
// convolution (compiler/interp/eval_convolution.cc defines it): one spatial dimension of the
// window, and the whole shape of the work. Strides are in elements of each array. The loader's
// runtime reads both (hlocache_conv_dim and hlocache_conv_spec, field for field).
struct hc_conv_dim {
  int64_t in_extent, in_stride, size, kernel_stride, out_extent, out_stride;
  int64_t stride, pad_low, base_dilation, window_dilation, reversed;
};
struct hc_conv_spec {
  int64_t spatial, out_batch, groups, feature_grouped, batch_grouped;
  int64_t kernel_in_features, outputs_per_group;
  int64_t in_batch_stride, in_feature_stride, kernel_in_stride, kernel_out_stride;
  int64_t out_batch_stride, out_feature_stride;
  const hc_conv_dim* dims;
};
// The kernel's offset of window position `pos` (row-major over the spatial dimensions), each
// dimension's index reversed where the spec says so.
inline int64_t hc_conv_kernel_offset(const hc_conv_spec& s, int64_t pos) {
  int64_t koff = 0;
  for (int64_t d = s.spatial - 1, rest = pos; d >= 0; --d) {
    const int64_t k = rest % s.dims[d].size;
    rest /= s.dims[d].size;
    koff += (s.dims[d].reversed ? s.dims[d].size - 1 - k : k) * s.dims[d].kernel_stride;
  }
  return koff;
}
// Each output element sums over the window positions in row-major order and, inside, the
// kernel's input features, from zero, in double for floats (rounded once) and modulo 2^64 for
// integers, as the interpreter does; padding and the holes of a dilated input are skipped,
// never multiplied. The kernel is packed once as [group][window position][input feature]
// [output feature of the group, padded to whole tiles]. Groups of at least a tile of output
// features (2 * hc_lanes) are computed 4 placements x a tile at a time in vector registers
// (tiles()); smaller groups (depthwise) a row of placements along the last spatial dimension at
// a time (rows()). f32 convolutions of a module that asked for BLAS are oneDNN's where the
// loader's runtime takes them (hc_conv), else one product (by_blas()). False when out of memory.
template <class Acc, class T, class L, class R>
struct hc_conv_run {
  typedef Acc V __attribute__((vector_size(hc_lanes * sizeof(Acc))));
  static constexpr int64_t kTile = 2 * hc_lanes, kPlacements = 4;
  const hc_conv_spec& s;
  const L* lhs;
  T* out;
  int64_t n, kif, opg, width, positions, outputs;
  const Acc* packed;
  int64_t* const* tap;  // tap[d][p * size + k]: input offset along d, or -1 (reads nothing).

  static Acc load(L x) { return hc_conv_load<Acc, T>(x); }
  void store(T* at, Acc v) const {
    if constexpr (kFloat<T>)
      *at = hc_store<T>(v);
    else
      *at = static_cast<T>(static_cast<int64_t>(v));
  }
  // The input offset window position `pos` reads at placement `p` (both row-major indices),
  // or -1.
  int64_t read(int64_t p, int64_t pos) const {
    int64_t at = 0;
    for (int64_t d = n - 1; d >= 0; --d) {
      const int64_t size = s.dims[d].size, extent = s.dims[d].out_extent;
      const int64_t t = tap[d][(p % extent) * size + pos % size];
      if (t < 0) return -1;
      at += t;
      p /= extent;
      pos /= size;
    }
    return at;
  }
  int64_t out_offset(int64_t p) const {
    int64_t at = 0;
    for (int64_t d = n - 1; d >= 0; --d) {
      at += (p % s.dims[d].out_extent) * s.dims[d].out_stride;
      p /= s.dims[d].out_extent;
    }
    return at;
  }

  // Runs item(first, end) on ranges of the work items, split across threads: items are in order
  // of batch, group, then the group's `per_group` items (tiles of placements, or rows), each
  // written by one thread as on one. False when a range ran out of memory.
  template <class Item>
  bool split(int64_t per_group, int64_t macs_per_item, Item item) const {
    return hc_parallel_body(
        s.out_batch * s.groups * per_group,
        std::max<int64_t>(1, hc_parallel_macs / std::max<int64_t>(1, macs_per_item)), item);
  }
  const L* input(int64_t b, int64_t g) const {
    return lhs + (s.batch_grouped ? g * s.out_batch + b : b) * s.in_batch_stride +
           (s.feature_grouped ? g * kif : 0) * s.in_feature_stride;
  }

  // f32 by the loader's BLAS (the module asked for it): for each batch and group, the input's
  // windows laid out as a matrix (zeros where a window reads padding or a hole), a chunk of
  // placements at a time, times the kernel as a [window position, input feature] x [output
  // feature] matrix, in one sgemm; the sums then stored at their outputs. Where input features
  // are adjacent in memory (NHWC), a placement's window is a row, copied a feature run at a
  // time; otherwise (NCHW) a window element's placements are a row, read along the input's own
  // rows, and the product comes out a row per output feature, as NCHW stores it. Chunks are
  // split across threads, each product on one (BLAS's own threads, which spin while they wait,
  // would contend with them); a single chunk has BLAS's threads instead. 1 where BLAS is absent
  // or refuses the sizes, or memory is short: the caller computes it itself then, writing every
  // output again.
  int by_blas(const R* rhs) const {
    if (&hlocache_blas_runtime == nullptr || hlocache_blas_runtime == nullptr) return 1;
    const int64_t k = positions * kif;
    if (k == 0 || opg == 0) return 1;
    // Chunks of a megabyte of windows: in a core's L2 still when BLAS packs them.
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(outputs, (int64_t{1} << 18) / k));
    const int64_t chunks = (outputs + chunk - 1) / chunk;
    hc_temp<float> kernel(s.groups * k * opg);
    if (!kernel) return 1;
    for (int64_t g = 0; g < s.groups; ++g) {
      for (int64_t pos = 0; pos < positions; ++pos) {
        const int64_t koff = hc_conv_kernel_offset(s, pos);
        for (int64_t f = 0; f < kif; ++f) {
          for (int64_t o = 0; o < opg; ++o) {
            kernel[((g * positions + pos) * kif + f) * opg + o] =
                rhs[koff + f * s.kernel_in_stride + (g * opg + o) * s.kernel_out_stride];
          }
        }
      }
    }
    const bool by_placement = s.in_feature_stride == 1;
    const int64_t items = s.groups * s.out_batch * chunks;
    const int wanted = hc_threads_wanted();
    const int threads = items >= wanted ? 1 : wanted;  // Per product.
    std::atomic<int> refused{0};
    auto product = [&](int64_t lo, int64_t hi) {
      hc_temp<float> rows(chunk * k);
      hc_temp<float> sums(chunk * opg);
      // Runs of window elements (at most one per placement, and an end each), then out offsets.
      std::unique_ptr<int64_t[]> scratch(new (std::nothrow)
                                             int64_t[3 * (chunk + 1) * positions + chunk]);
      if (!rows || !sums || !scratch) {
        refused = 1;
        return true;
      }
      int64_t* const outs = &scratch[3 * (chunk + 1) * positions];
      for (int64_t item = lo; item < hi && refused.load() == 0; ++item) {
        const int64_t g = item / (s.out_batch * chunks), b = item / chunks % s.out_batch;
        const int64_t p0 = item % chunks * chunk, live = std::min(chunk, outputs - p0);
        const L* x = input(b, g);
        T* const o = out + b * s.out_batch_stride + g * opg * s.out_feature_stride;
        for (int64_t j = 0; j < live; ++j) outs[j] = out_offset(p0 + j);
        if (by_placement) {
          for (int64_t j = 0; j < live; ++j) {
            for (int64_t pos = 0; pos < positions; ++pos) {
              float* to = &rows[j * k + pos * kif];
              const int64_t r = read(p0 + j, pos);
              if (r < 0) {
                std::memset(to, 0, sizeof(float) * kif);
              } else {
                std::memcpy(to, x + r, sizeof(float) * kif);
              }
            }
          }
          if (hlocache_blas_runtime->sgemm(threads, 0, 0, live, opg, k, rows.get(), k,
                                           &kernel[g * k * opg], opg, sums.get(), opg) != 0) {
            refused = 1;
            return true;
          }
          for (int64_t j = 0; j < live; ++j) {
            for (int64_t c = 0; c < opg; ++c)
              o[outs[j] + c * s.out_feature_stride] = sums[j * opg + c];
          }
          continue;
        }
        // Each window element's placements as runs of adjacent inputs (or of padding): the
        // same runs for every input feature, each one copy.
        int64_t* const runs = scratch.get();  // [start, end, first input or -1] per run.
        int64_t* run = runs;
        for (int64_t pos = 0; pos < positions; ++pos) {
          for (int64_t j = 0; j < live;) {
            const int64_t first = read(p0 + j, pos);
            int64_t e = j + 1;
            while (e < live) {
              const int64_t r = read(p0 + e, pos);
              if (first < 0 ? r >= 0 : r != first + (e - j)) break;
              ++e;
            }
            run[0] = j, run[1] = e, run[2] = first;
            run += 3;
            j = e;
          }
          run[0] = -1;  // The window element's last run.
          run += 3;
        }
        for (int64_t f = 0; f < kif; ++f) {
          const L* xf = x + f * s.in_feature_stride;
          const int64_t* r = runs;
          for (int64_t pos = 0; pos < positions; ++pos, r += 3) {
            float* to = &rows[(pos * kif + f) * live];
            for (; r[0] >= 0; r += 3) {
              if (r[2] < 0) {
                std::memset(to + r[0], 0, sizeof(float) * static_cast<size_t>(r[1] - r[0]));
              } else {
                std::memcpy(to + r[0], xf + r[2], sizeof(float) * static_cast<size_t>(r[1] - r[0]));
              }
            }
          }
        }
        if (hlocache_blas_runtime->sgemm(threads, 1, 0, opg, live, k, &kernel[g * k * opg], opg,
                                         rows.get(), live, sums.get(), live) != 0) {
          refused = 1;
          return true;
        }
        for (int64_t c = 0; c < opg; ++c) {
          T* oc = o + c * s.out_feature_stride;
          const float* from = &sums[c * live];
          for (int64_t j = 0; j < live; ++j) oc[outs[j]] = from[j];
        }
      }
      return true;
    };
    hc_parallel_body(items, 1, product);
    return refused.load();
  }

  bool tiles() const {
    const int64_t blocks = (outputs + kPlacements - 1) / kPlacements;
    return split(blocks, kPlacements * positions * kif * width, [&](int64_t first, int64_t end) {
      std::unique_ptr<int64_t[]> reads(new (std::nothrow) int64_t[kPlacements * positions + 1]);
      if (!reads) return false;
      for (int64_t item = first; item < end; ++item) {
        const int64_t b = item / (s.groups * blocks), g = item / blocks % s.groups;
        const L* x = input(b, g);
        {
          const int64_t p0 = item % blocks * kPlacements;
          const int64_t live = std::min(kPlacements, outputs - p0);
          for (int64_t j = 0; j < kPlacements; ++j) {
            for (int64_t pos = 0; pos < positions; ++pos) {
              reads[j * positions + pos] = j < live ? read(p0 + j, pos) : -1;
            }
          }
          for (int64_t o0 = 0; o0 < opg; o0 += kTile) {
            V c[kPlacements][2] = {};
            for (int64_t pos = 0; pos < positions; ++pos) {
              const Acc* w = packed + ((g * positions + pos) * kif) * width + o0;
              const int64_t r0 = reads[pos], r1 = reads[positions + pos],
                            r2 = reads[2 * positions + pos], r3 = reads[3 * positions + pos];
              if (r0 >= 0 && r1 >= 0 && r2 >= 0 && r3 >= 0) {
                for (int64_t f = 0; f < kif; ++f, w += width) {
                  V y0, y1;
                  std::memcpy(&y0, w, sizeof y0);
                  std::memcpy(&y1, w + hc_lanes, sizeof y1);
                  const int64_t fo = f * s.in_feature_stride;
                  const Acc x0 = load(x[r0 + fo]), x1 = load(x[r1 + fo]);
                  const Acc x2 = load(x[r2 + fo]), x3 = load(x[r3 + fo]);
                  c[0][0] += x0 * y0;
                  c[0][1] += x0 * y1;
                  c[1][0] += x1 * y0;
                  c[1][1] += x1 * y1;
                  c[2][0] += x2 * y0;
                  c[2][1] += x2 * y1;
                  c[3][0] += x3 * y0;
                  c[3][1] += x3 * y1;
                }
              } else {
                for (int64_t j = 0; j < kPlacements; ++j) {
                  const int64_t r = reads[j * positions + pos];
                  if (r < 0) continue;
                  const Acc* wj = w;
                  for (int64_t f = 0; f < kif; ++f, wj += width) {
                    V y0, y1;
                    std::memcpy(&y0, wj, sizeof y0);
                    std::memcpy(&y1, wj + hc_lanes, sizeof y1);
                    const Acc xj = load(x[r + f * s.in_feature_stride]);
                    c[j][0] += xj * y0;
                    c[j][1] += xj * y1;
                  }
                }
              }
            }
            const int64_t cols = std::min(kTile, opg - o0);
            for (int64_t j = 0; j < live; ++j) {
              Acc sums[kTile];
              std::memcpy(sums, &c[j][0], sizeof(V));
              std::memcpy(sums + hc_lanes, &c[j][1], sizeof(V));
              T* o = out + out_offset(p0 + j) + b * s.out_batch_stride +
                     (g * opg + o0) * s.out_feature_stride;
              for (int64_t k = 0; k < cols; ++k) store(o + k * s.out_feature_stride, sums[k]);
            }
          }
        }
      }
      return true;
    });
  }

  // Placements run along the last spatial dimension, a row at a time: for each window position
  // and input feature, one multiply-add into the row's sums for every placement that reads.
  bool rows() const {
    const hc_conv_dim& last = s.dims[n - 1];
    const int64_t row = last.out_extent, size = last.size;
    // Without holes, the placements that read window element k form one range [lo, hi).
    std::unique_ptr<int64_t[]> range(new (std::nothrow) int64_t[2 * size]);
    if (!range) return false;
    for (int64_t k = 0; k < size; ++k) {
      int64_t lo = 0, hi = 0;
      if (last.base_dilation == 1) {
        while (lo < row && tap[n - 1][lo * size + k] < 0) ++lo;
        hi = lo;
        while (hi < row && tap[n - 1][hi * size + k] >= 0) ++hi;
      }
      range[2 * k] = lo;
      range[2 * k + 1] = hi;
    }
    const int64_t outer = outputs / row, outer_positions = positions / size;
    return split(outer, opg * positions * kif * row, [&](int64_t first, int64_t end) {
      std::unique_ptr<Acc[]> sums(new (std::nothrow) Acc[row]);
      if (!sums) return false;
      for (int64_t item = first; item < end; ++item) {
        const int64_t b = item / (s.groups * outer), g = item / outer % s.groups;
        const L* x = input(b, g);
        {
          const int64_t q = item % outer;
          for (int64_t o = 0; o < opg; ++o) {
            Acc* const acc = sums.get();
            for (int64_t p = 0; p < row; ++p) acc[p] = Acc(0);
            for (int64_t op = 0; op < outer_positions; ++op) {
              // The offset along the outer dimensions (placement q, window position op).
              int64_t base = 0;
              bool hit = true;
              for (int64_t d = n - 2, qq = q, pp = op; d >= 0; --d) {
                const int64_t t =
                    tap[d][(qq % s.dims[d].out_extent) * s.dims[d].size + pp % s.dims[d].size];
                hit = hit && t >= 0;
                base += t;
                qq /= s.dims[d].out_extent;
                pp /= s.dims[d].size;
              }
              if (!hit) continue;
              for (int64_t k = 0; k < size; ++k) {
                const int64_t pos = op * size + k;
                const Acc* w = packed + ((g * positions + pos) * kif) * width + o;
                const int64_t* t = tap[n - 1] + k;  // t[p * size]: placement p's read.
                const int64_t lo = range[2 * k], hi = range[2 * k + 1];
                if (last.base_dilation == 1 && lo >= hi) continue;
                for (int64_t f = 0; f < kif; ++f) {
                  const Acc wf = w[f * width];
                  const L* xf = x + base + f * s.in_feature_stride;
                  if (last.base_dilation == 1) {
                    const L* xs = xf + t[lo * size];
                    const int64_t step = last.stride * last.in_stride;
                    for (int64_t p = lo; p < hi; ++p) acc[p] += load(xs[(p - lo) * step]) * wf;
                  } else {
                    for (int64_t p = 0; p < row; ++p) {
                      if (t[p * size] >= 0) acc[p] += load(xf[t[p * size]]) * wf;
                    }
                  }
                }
              }
            }
            T* o_at = out + out_offset(q * row) + b * s.out_batch_stride +
                      (g * opg + o) * s.out_feature_stride;
            for (int64_t p = 0; p < row; ++p) store(o_at + p * last.out_stride, acc[p]);
          }
        }
      }
      return true;
    });
  }
};

template <class T, class L, class R>
bool hc_conv(const L* lhs, const R* rhs, T* out, const hc_conv_spec& s) {
  using Acc = std::conditional_t<kFloat<T>, double, uint64_t>;
  using Run = hc_conv_run<Acc, T, L, R>;
  const int64_t n = s.spatial, kif = s.kernel_in_features, opg = s.outputs_per_group;
  int64_t positions = 1, taps = 0, outputs = 1;
  for (int64_t d = 0; d < n; ++d) {
    positions *= s.dims[d].size;
    taps += s.dims[d].size * s.dims[d].out_extent;
    outputs *= s.dims[d].out_extent;
  }
  if (outputs == 0 || s.out_batch == 0 || s.groups * opg == 0) return true;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<L, float> && std::is_same_v<R, float>) {
    // oneDNN's direct convolution, where the loader has it and takes this one.
    if (&hlocache_blas_runtime != nullptr && hlocache_blas_runtime != nullptr &&
        hlocache_blas_runtime->conv != nullptr &&
        hlocache_blas_runtime->conv(hc_pool::in_loop() ? 1 : hc_threads_wanted(), &s, lhs, rhs,
                                    out) == 0) {
      return true;
    }
  }
  const bool by_rows = n > 0 && opg < Run::kTile;
  const int64_t width = by_rows ? opg : (opg + Run::kTile - 1) / Run::kTile * Run::kTile;
  std::unique_ptr<int64_t[]> tap(new (std::nothrow) int64_t[taps > 0 ? taps : 1]);
  std::unique_ptr<int64_t*[]> tap_of(new (std::nothrow) int64_t*[n > 0 ? n : 1]);
  hc_temp<Acc> packed(s.groups * positions * kif * width + 1);
  if (!tap || !tap_of || !packed) return false;
  for (int64_t d = 0, at = 0; d < n; ++d) {
    const hc_conv_dim& w = s.dims[d];
    tap_of[d] = &tap[at];
    for (int64_t p = 0; p < w.out_extent; ++p) {
      for (int64_t k = 0; k < w.size; ++k) {
        const int64_t x = p * w.stride + k * w.window_dilation - w.pad_low;
        const bool hit = x >= 0 && x % w.base_dilation == 0 && x / w.base_dilation < w.in_extent;
        tap[at++] = hit ? x / w.base_dilation * w.in_stride : -1;
      }
    }
  }
  auto load = [](R v) { return hc_conv_load<Acc, T>(v); };
  for (int64_t g = 0; g < s.groups; ++g) {
    for (int64_t pos = 0; pos < positions; ++pos) {
      const int64_t koff = hc_conv_kernel_offset(s, pos);
      Acc* to = &packed[(g * positions + pos) * kif * width];
      for (int64_t c = 0; c < kif; ++c) {
        for (int64_t o = 0; o < width; ++o) {
          to[c * width + o] =
              o < opg
                  ? load(rhs[koff + c * s.kernel_in_stride + (g * opg + o) * s.kernel_out_stride])
                  : Acc(0);
        }
      }
    }
  }
  const Run run{s, lhs, out, n, kif, opg, width, positions, outputs, packed.get(), tap_of.get()};
  if constexpr (std::is_same_v<T, float> && std::is_same_v<L, float> && std::is_same_v<R, float>) {
    if (run.by_blas(rhs) == 0) return true;
  }
  return by_rows ? run.rows() : run.tiles();
}
// batch-norm-training and -inference (compiler/interp/eval_batch_norm.cc defines them), the
// operand viewed as [outer][features][inner]: in double, sums in row-major order, each result
// rounded once. Training passes no mean_in and var_in and gets mean_out and var_out.
template <class T>
void hc_batch_norm(const T* x, const T* scale, const T* offset, const T* mean_in, const T* var_in,
                   T* y, T* mean_out, T* var_out, int64_t outer, int64_t features, int64_t inner,
                   double eps) {
  const double n = static_cast<double>(outer * inner);
  for (int64_t c = 0; c < features; ++c) {
    double mean = 0, var = 0;
    if (mean_in == nullptr) {
      for (int64_t o = 0; o < outer; ++o) {
        const T* xc = x + (o * features + c) * inner;
        for (int64_t i = 0; i < inner; ++i) mean += hc_load(xc[i]);
      }
      mean /= n;
      for (int64_t o = 0; o < outer; ++o) {
        const T* xc = x + (o * features + c) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const double d = hc_load(xc[i]) - mean;
          var += d * d;
        }
      }
      var /= n;
      mean_out[c] = hc_store<T>(mean);
      var_out[c] = hc_store<T>(var);
    } else {
      mean = hc_load(mean_in[c]);
      var = hc_load(var_in[c]);
    }
    const double s = hc_load(scale[c]), b = hc_load(offset[c]), root = std::sqrt(var + eps);
    for (int64_t o = 0; o < outer; ++o) {
      const T* xc = x + (o * features + c) * inner;
      T* yc = y + (o * features + c) * inner;
      for (int64_t i = 0; i < inner; ++i)
        yc[i] = hc_store<T>((hc_load(xc[i]) - mean) / root * s + b);
    }
  }
}
// batch-norm-grad, likewise.
template <class T>
void hc_batch_norm_grad(const T* x, const T* scale, const T* mean_in, const T* var_in, const T* dy,
                        T* dx, T* dscale_out, T* doffset_out, int64_t outer, int64_t features,
                        int64_t inner, double eps) {
  const double n = static_cast<double>(outer * inner);
  for (int64_t c = 0; c < features; ++c) {
    const double mean = hc_load(mean_in[c]), s = hc_load(scale[c]);
    const double inv = 1 / std::sqrt(hc_load(var_in[c]) + eps);
    double doffset = 0, dscale = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t at = (o * features + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const double g = hc_load(dy[at + i]);
        doffset += g;
        dscale += g * (hc_load(x[at + i]) - mean) * inv;
      }
    }
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t at = (o * features + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const double centered = hc_load(x[at + i]) - mean;
        dx[at + i] = hc_store<T>(s * inv / n *
                                 (n * hc_load(dy[at + i]) - doffset - centered * inv * dscale));
      }
    }
    dscale_out[c] = hc_store<T>(dscale);
    doffset_out[c] = hc_store<T>(doffset);
  }
}
}  // namespace hlocache_rt
