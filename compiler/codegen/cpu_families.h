// The CPU code generator's op families outside the core, one file each (see
// cpu_extended_ops.h for what a family provides). Internal to compiler/codegen.
#pragma once

#include "compiler/codegen/cpu_extended_ops.h"

namespace hlocache::compiler {

// cpu_collectives.cc: the collectives of a one-participant program, partition-id, replica-id.
CpuOpFamily CpuCollectiveOps();

// cpu_gather_scatter.cc: gather (contiguous runs copied with memcpy) and scatter (the update
// computation called, or its one op inlined, in the loop).
CpuOpFamily CpuGatherScatterOps();

// cpu_control.cc: while, conditional, map.
CpuOpFamily CpuControlOps();

// cpu_scan.cc: scan.
CpuOpFamily CpuScanOps();

// cpu_wrappers.cc: tokens (after-all), add-dependency, opt-barrier, domain, copy-start/-done,
// async-start/-update/-done.
CpuOpFamily CpuWrapperOps();

// cpu_elementwise.cc: popcnt, count-leading-zeros, cbrt, tan, erf, the inverse and hyperbolic
// functions, reduce-precision, bitcast-convert, stochastic-convert.
CpuOpFamily CpuElementwiseOps();

// cpu_sort.cc: sort, topk.
CpuOpFamily CpuSortOps();

// cpu_window.cc: reduce-window, select-and-scatter.
CpuOpFamily CpuWindowOps();

// cpu_convolution.cc: convolution.
CpuOpFamily CpuConvolutionOps();

// cpu_batch_norm.cc: batch-norm-training, -inference and -grad.
CpuOpFamily CpuBatchNormOps();

// cpu_rng.cc: rng-bit-generator, rng-get-and-update-state, rng.
CpuOpFamily CpuRngOps();

// cpu_linalg.cc: cholesky, triangular-solve.
CpuOpFamily CpuLinalgOps();

// cpu_dots.cc: scaled-dot, ragged-dot.
CpuOpFamily CpuDotOps();

// cpu_host.cc: infeed, outfeed, and send, send-done, recv, recv-done to and from the host.
CpuOpFamily CpuHostOps();

// cpu_dynamic.cc: set-dimension-size, get-dimension-size, dynamic-reshape.
CpuOpFamily CpuDynamicOps();

}  // namespace hlocache::compiler
