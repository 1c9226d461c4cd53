// The interpreter's op families outside the core, one file each (see extended_ops.h for what a
// family provides; its shape rules are in compiler/semantics/rules/). Internal to
// compiler/interp.
#pragma once

#include "compiler/interp/extended_ops.h"

namespace hlocache::interp {

// eval_collectives.cc: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
// collective-broadcast (and their -start/-done forms), partition-id and replica-id, for
// programs of one participant.
OpFamily CollectiveOps();

// eval_gather_scatter.cc: gather and scatter (all dimension numbers, batching dimensions, any
// update computation).
OpFamily GatherScatterOps();

// eval_control.cc: while, conditional, map.
OpFamily ControlOps();

// eval_scan.cc: scan.
OpFamily ScanOps();

// eval_wrappers.cc: tokens (after-all), add-dependency, opt-barrier, domain, copy-start/-done,
// async-start/-update/-done.
OpFamily WrapperOps();

// eval_elementwise.cc: popcnt, count-leading-zeros, cbrt, tan, erf, the inverse and hyperbolic
// functions, reduce-precision, bitcast-convert, stochastic-convert.
OpFamily ElementwiseOps();

// eval_sort.cc: sort, topk.
OpFamily SortOps();

// eval_window.cc: reduce-window, select-and-scatter.
OpFamily WindowOps();

// eval_convolution.cc: convolution.
OpFamily ConvolutionOps();

// eval_batch_norm.cc: batch-norm-training, -inference and -grad.
OpFamily BatchNormOps();

// eval_rng.cc: rng-bit-generator, rng-get-and-update-state, rng.
OpFamily RngOps();

// eval_linalg.cc: cholesky, triangular-solve.
OpFamily LinalgOps();

// eval_dots.cc: scaled-dot, ragged-dot.
OpFamily DotOps();

// eval_host.cc: infeed, outfeed, and send, send-done, recv, recv-done to and from the host.
OpFamily HostOps();

// eval_dynamic.cc: set-dimension-size, get-dimension-size, dynamic-reshape.
OpFamily DynamicOps();

}  // namespace hlocache::interp
