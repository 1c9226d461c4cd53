// The payload of a GPU artifact (payload kind `cubin+plan`, schema/artifact-container.md): the
// cubin NVRTC built for one architecture, and the launch plan that runs it: the device buffers
// the program needs, which of them hold the parameters and the results, and the steps in
// order, each a kernel launch (kernel name, grid and block sizes, buffer arguments) or a copy
// between buffers.
//
// Layout: the 8 bytes "HLOCUBIN", a little-endian u64 plan length L, the plan (UTF-8 JSON, L
// bytes), then the cubin (the rest). The container's checksum covers it all.
//
// Thread safety: value types and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "compiler/artifact/container.h"

namespace hlocache::compiler {

struct CudaStep {
  // A launch when `kernel` is set: args are buffer indices, passed as device pointers in order.
  std::string kernel;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::vector<int64_t> args;
  // Otherwise a copy of `bytes` bytes from buffer `from` to buffer `to`.
  int64_t from = -1, to = -1, bytes = 0;
};

struct CudaPlan {
  std::string arch;                   // "sm_80", "sm_90": the cubin's architecture.
  std::vector<int64_t> buffer_bytes;  // Size of each device buffer (at least 1).
  std::vector<int64_t> parameters;    // Buffer of each parameter leaf, in order.
  std::vector<int64_t> results;       // Buffer of each result leaf, in order.
  std::vector<CudaStep> steps;
};

struct CudaPayload {
  CudaPlan plan;
  std::string cubin;
};

std::string EncodeCudaPayload(const CudaPlan& plan, std::string_view cubin);
// kDataLoss for bytes that are not such a payload, or a plan whose buffer indices, kernel names
// or sizes do not hold together (a plan that passes runs no step out of bounds of its buffers'
// count).
Result<CudaPayload> DecodeCudaPayload(std::string_view payload);

// The architecture a cubin was built for, from its ELF header (EM_CUDA, the CUDA OS/ABI, the
// SM number in e_flags): "sm_90". kDataLoss when the bytes are not a CUDA ELF file.
Result<std::string> CubinArch(std::string_view cubin);

}  // namespace hlocache::compiler
