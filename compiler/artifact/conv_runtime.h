// f32 convolutions for generated CPU executables by oneDNN, the library PyTorch's CPU
// convolutions run on: opened at run time (libdnnl.so.2, Debian's libdnnl2; HLOCACHE_DNNL_LIBRARY
// names another, "none" turns it off), never linked into an executable or into hlocache.
//
// The convolution is oneDNN's direct one, in the layouts it chooses for this CPU (blocked by 16
// features with AVX-512), the operands reordered into them and the result back, as PyTorch does;
// sums in float, in oneDNN's order (schema/numerics.tsv lets f32 convolutions of a module that
// calls BLAS sum in another order). Taken: 1 to 3 spatial dimensions, feature groups, window
// strides and dilation, padding at or above zero at the start (any at the end); refused (the
// executable computes it): input dilation, reversed windows, batch groups, and convolutions under
// kMinDnnlMacs multiply-adds, where oneDNN's set-up would cost more than it saves.
//
// Thread safety: every function may be called from any thread; the library is opened once per
// process, at the first call, and kept open. Each convolution (its shape, strides and thread
// count) is prepared once and kept: its primitives, the buffers in oneDNN's layouts and a
// scratchpad of its own (oneDNN's shared one would tie a primitive to the thread that made it).
// At most kKeptConvolutions are kept, most recently used first, within 256 MiB of buffers; two
// threads running the same one at once take turns. A call sets the calling thread's OpenMP
// thread count for its run and puts it back.
#pragma once

#include <cstdint>

#include "compiler/artifact/blas_runtime.h"

namespace hlocache::compiler {

inline constexpr int64_t kMinDnnlMacs = int64_t{1} << 24;
inline constexpr int kKeptConvolutions = 32;

// hlocache_blas::conv by oneDNN: 0 when it computed every element of `out`; 1, with `out` in an
// unspecified state, where this host has no oneDNN or it does not take the convolution.
int DnnlConvolve(int threads, const hlocache_conv_spec* spec, const float* lhs, const float* rhs,
                 float* out);

// Whether this process can open oneDNN (opening it if no call has yet).
bool HasDnnl();

// How many convolutions oneDNN has computed in this process (for tests and diagnostics).
uint64_t DnnlConvolutionCount();

}  // namespace hlocache::compiler
