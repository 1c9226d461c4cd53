// NVRTC, CUDA's runtime compiler, loaded with dlopen when first needed: hlocache builds, runs
// and passes its tests on machines without CUDA, and a CUDA target there says that NVRTC is
// missing. Compiling needs no GPU and no driver.
//
// The library is HLOCACHE_NVRTC_LIBRARY when that is set, else the first of libnvrtc.so,
// libnvrtc.so.13, libnvrtc.so.12 the dynamic loader finds.
//
// Ownership: Nvrtc::Get() returns a process-wide instance that lives until exit.
// Thread safety: all members may be called from any thread; NVRTC programs are independent.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache::compiler {

class Nvrtc {
 public:
  // The loaded library, or kFailedPrecondition saying which library could not be loaded and
  // why. The first call loads it; later calls return the same outcome.
  static Result<const Nvrtc*> Get();

  // "13.0".
  const std::string& version() const { return version_; }

  // Compiles CUDA C++ `source` (one translation unit, no includes) into a cubin for `arch`
  // ("sm_80", "sm_90"). kInternal with NVRTC's log when the source does not compile.
  Result<std::string> CompileToCubin(std::string_view source, std::string_view arch,
                                     std::string_view name) const;

  struct Api;  // The library's entry points (nvrtc.cc).

 private:
  Nvrtc() = default;
  const Api* api_ = nullptr;
  std::string version_;
};

}  // namespace hlocache::compiler
