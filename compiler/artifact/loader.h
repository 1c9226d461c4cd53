// Loading executables from artifacts into this process.
//
// A shared-object payload is written to an anonymous memory file (memfd_create) and opened with
// dlopen from /proc/self/fd: nothing is written to any filesystem, and nothing is left behind
// whatever happens. The artifact's checksum is checked (DecodeArtifact) before a byte of it is
// mapped, and its target must be one this CPU runs.
//
// Ownership: a LoadedExecutable owns its library handle; the library is unloaded when the last
// owner goes away, so function pointers from Symbol() must not outlive it.
// Thread safety: Load may be called from any thread; a LoadedExecutable is immutable.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "compiler/artifact/container.h"

namespace hlocache::compiler {

class LoadedExecutable {
 public:
  ~LoadedExecutable();
  LoadedExecutable(const LoadedExecutable&) = delete;
  LoadedExecutable& operator=(const LoadedExecutable&) = delete;

  // Verifies and loads an artifact. Errors: those of DecodeArtifact; kFailedPrecondition when
  // the target does not run on this host or the payload kind cannot be loaded here;
  // kInvalidArgument when the payload is not a loadable shared object or lacks its entry symbol
  // (the message carries the dynamic loader's reason); kIoError when no memory file can be made.
  static Result<std::unique_ptr<LoadedExecutable>> Load(std::string_view artifact_bytes);

  const ArtifactHeader& header() const { return header_; }
  // The entry symbol's address (never null once loaded).
  void* entry() const { return entry_; }
  // Any other exported symbol, or kNotFound.
  Result<void*> Symbol(const std::string& name) const;

 private:
  LoadedExecutable(ArtifactHeader header, void* handle, void* entry)
      : header_(std::move(header)), handle_(handle), entry_(entry) {}

  ArtifactHeader header_;
  void* handle_;
  void* entry_;
};

// Opens shared-object bytes through a memory file. The caller owns the returned handle
// (dlclose). `name` shows in /proc/self/maps and in loader errors.
Result<void*> OpenSharedObjectInMemory(std::string_view bytes, const std::string& name);

// Whether executables built for `target` run on this host: cpu-x86-64-vN for N up to the host's
// level; never a GPU target (those go through the CUDA runtime, not dlopen).
bool RunsOnHost(std::string_view target);

}  // namespace hlocache::compiler
