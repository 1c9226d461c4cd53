// Running a GPU executable (payload kind `cubin+plan`, compiler/artifact/cuda_payload.h) with the
// CUDA driver API, loaded with dlopen when first needed: hlocache builds, runs and passes its
// tests on machines without a GPU or its driver, and running a GPU executable there says which
// is missing.
//
// The driver is HLOCACHE_CUDA_DRIVER_LIBRARY when that is set, else libcuda.so.1.
//
// Thread safety: RunCudaPlan may be called from any thread; each call uses device 0's primary
// context and allocates and frees its own buffers.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/artifact/cuda_payload.h"
#include "compiler/hlo/shape.h"

namespace hlocache::compiler {

struct CudaRun {
  std::vector<std::string> results;  // Each result leaf's dense row-major bytes.
  double run_ms = 0;                 // From the first copy in to the last copy out.
  std::string device;                // "NVIDIA H100 80GB HBM3 (sm_90)".
};

// Copies `inputs` (the bytes of each parameter leaf, in order) into device buffers, runs the
// plan's steps, and copies the results out (`results` gives each result leaf's shape).
// Errors: kFailedPrecondition when the driver cannot be loaded ("no CUDA driver"), there is no
// GPU, or the GPU is not of the plan's architecture; kInvalidArgument when the inputs do not
// fit the plan; kInternal with the driver's message when a step fails.
Result<CudaRun> RunCudaPlan(const CudaPayload& payload, std::span<const std::string> inputs,
                            std::span<const hlo::Shape> results);

}  // namespace hlocache::compiler
