// The text every generated CUDA unit starts with: compiler/cuda/prelude/hc_cuda.h (its part
// below the marker line), embedded into the binary at build time by
// compiler/embed_preludes.cmake. That file says what the prelude holds and why.
#pragma once

namespace hlocache::compiler {

// NUL-terminated; static storage.
extern const char* const kCudaPrelude;

}  // namespace hlocache::compiler
