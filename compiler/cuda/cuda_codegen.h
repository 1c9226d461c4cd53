// Lowering of an HLO module to CUDA C++ kernels and the launch plan that runs them, for the
// `cuda-sm_80` and `cuda-sm_90` targets. NVRTC compiles the source (compiler/cuda/nvrtc.h);
// the plan goes into the artifact with the cubin (compiler/artifact/cuda_payload.h).
//
// The op set is the compiler worker's core: elementwise and bitwise ops, compare, select,
// clamp, convert, iota, constants, broadcast, reshape, bitcast, copy, transpose, slice, pad,
// concatenate, reverse, dynamic slices, reduce (any computation of scalar elementwise ops,
// variadic), dot, tuples, call and fusion; pred, integers, f16, bf16, f32, f64. Calls and
// fusions are inlined, tuples resolved, and every other instruction the root depends on becomes
// one kernel, except elementwise chains, which fuse into their single user's kernel. Each
// kernel computes one output element per thread (reduce: one result, folding in row-major
// order; dot: 16 x 16 results per block over shared-memory tiles of k, summed in k order), in
// double for floats and rounded once: the results of the reference interpreter up to the GPU's
// transcendental functions.
//
// Thread safety: pure function of its arguments.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "compiler/artifact/cuda_payload.h"
#include "compiler/hlo/module.h"

namespace hlocache::compiler {

struct CudaProgram {
  std::string source;  // One translation unit: the device prelude, then the kernels.
  CudaPlan plan;       // Its `arch` is the one asked for.
};

// Errors: kFailedPrecondition "FILE:LINE: the CUDA code generator does not support WHAT
// (instruction 'NAME')" for ops, types or shapes outside the set above; kInvalidArgument for
// modules that contradict themselves (the interpreter's shape rules).
Result<CudaProgram> LowerToCuda(const hlo::Module& module, std::string_view arch);

// The text every program's source begins with: the device prelude (prelude/hc_cuda.h) and the
// code it shares with the interpreter (the 16-bit float formats, compiler/semantics/half.h).
const std::string& CudaUnitPrelude();

// "sm_90" for "cuda-sm_90"; empty for targets that are not CUDA targets this builds.
std::string CudaTargetArch(std::string_view target);

}  // namespace hlocache::compiler
