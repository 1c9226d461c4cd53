// Runs a CUDA program of the code generator (compiler/cuda/cuda_codegen.h) on the host CPU, for
// tests on machines without a GPU: the generated kernels, unchanged, are compiled by the system
// C++ compiler behind a small shim (blockIdx, threadIdx, __shared__ and __syncthreads as the
// CUDA programming model defines them), and the launch plan is carried out step by step, each
// block's threads running as real threads that meet at every __syncthreads.
//
// What it checks is the code generator's own work: index arithmetic, fusion, buffer
// assignment, the plan's order and sizes. The GPU's libm and the host's may differ in the last
// bit of a transcendental function; everything else computes the same on both.
//
// Thread safety: one run at a time per process.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/cuda/cuda_codegen.h"
#include "compiler/hlo/shape.h"

namespace hlocache::compiler {

// Runs `program` on `inputs` (each parameter leaf's bytes) and returns each result leaf's bytes.
Result<std::vector<std::string>> EmulateCudaProgram(const CudaProgram& program,
                                                    std::span<const std::string> inputs,
                                                    std::span<const hlo::Shape> results);

}  // namespace hlocache::compiler
