// Loading executables from artifacts into this process.
//
// A shared-object payload is written to an anonymous memory file (memfd_create) and opened with
// dlopen from /proc/self/fd: nothing is written to any filesystem, and nothing is left behind
// whatever happens. The artifact's checksum is checked (DecodeArtifact) before a byte of it is
// mapped, and its target must be one this CPU runs.
//
// Ownership: a LoadedExecutable owns its library handle; the library is unloaded when the last
// owner goes away, so function pointers from Symbol() must not outlive it.
// Thread safety: Load may be called from any thread; a LoadedExecutable is immutable. A CPU
// executable splits its large loops across a pool of threads of its own (HLOCACHE_THREADS,
// compiler/codegen/prelude/hc_cpu_threads.h), started by its first such loop and joined when it
// is unloaded: no run may be in flight when the last owner goes away.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "compiler/artifact/container.h"

namespace hlocache::compiler {

// A shared object loaded from memory (memfd_create, then dlopen of /proc/self/fd/N). The memory
// file stays open while the library is loaded: the dynamic loader knows a library by the path
// it was opened with, so fd N must not be reused for another library while this one is loaded,
// or dlopen would return this library for that one.
//
// Ownership: owns the library handle (dlclose) and the memory file; move-only.
class InMemoryLibrary {
 public:
  // `name` shows in /proc/self/maps and in loader errors. Errors: kIoError when no memory file
  // can be made; kInvalidArgument when the bytes are not a loadable shared object.
  static Result<InMemoryLibrary> Open(std::string_view bytes, const std::string& name);
  InMemoryLibrary(InMemoryLibrary&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), fd_(std::exchange(other.fd_, -1)) {}
  InMemoryLibrary& operator=(InMemoryLibrary&&) = delete;
  ~InMemoryLibrary();
  void* handle() const { return handle_; }

 private:
  InMemoryLibrary(void* handle, int fd) : handle_(handle), fd_(fd) {}
  void* handle_;
  int fd_;
};

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
  LoadedExecutable(ArtifactHeader header, InMemoryLibrary library, void* entry)
      : header_(std::move(header)), library_(std::move(library)), entry_(entry) {}

  ArtifactHeader header_;
  InMemoryLibrary library_;
  void* entry_;
};

// Whether executables built for `target` run on this host: cpu-x86-64-vN for N up to the host's
// level; never a GPU target (those go through the CUDA runtime, not dlopen).
bool RunsOnHost(std::string_view target);

}  // namespace hlocache::compiler
