// The dimension numbers of convolution, read from `dim_labels=b01f_01io->b01f` and checked
// against the operands' ranks, once for the reference interpreter and the code generator.
//
// Each of the three labels names, per dimension of the input, the kernel and the output, what
// it holds: the input's and output's batch (b) and feature (f) dimensions, the kernel's input
// (i) and output (o) feature dimensions, and the spatial dimensions of all three as digits
// 0, 1, ... in the order the window lists them.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "compiler/hlo/module.h"

namespace hlocache::hlo {

struct ConvolutionDims {
  int64_t input_batch = 0;
  int64_t input_feature = 0;
  std::vector<int64_t> input_spatial;  // Spatial dimension k of the window is input_spatial[k].
  int64_t kernel_input_feature = 0;
  int64_t kernel_output_feature = 0;
  std::vector<int64_t> kernel_spatial;
  int64_t output_batch = 0;
  int64_t output_feature = 0;
  std::vector<int64_t> output_spatial;
};

// The dimension numbers of `inst` for operands and a result of rank `rank` (at least 2).
// kInvalidArgument with the reason alone (the caller names the instruction) when the attribute
// is absent or its labels are not each a permutation of b, f (i, o for the kernel) and the
// digits 0 .. rank - 3.
Result<ConvolutionDims> ReadConvolutionDims(const Module& m, const Instruction& inst, size_t rank);

}  // namespace hlocache::hlo
