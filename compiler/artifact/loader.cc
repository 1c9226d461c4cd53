#include "compiler/artifact/loader.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "compiler/artifact/blas_runtime.h"
#include "compiler/artifact/targets.h"

namespace hlocache::compiler {
namespace {

std::string DlError() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown dynamic loader error";
}

}  // namespace

bool RunsOnHost(std::string_view target) {
  const int level = CpuTargetLevel(target);
  return level != 0 && level <= CpuTargetLevel(HostCpuTarget());
}

Result<InMemoryLibrary> InMemoryLibrary::Open(std::string_view bytes, const std::string& name) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    return Error(IoError("cannot create a memory file for " + name + ": " + std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return Error(IoError("cannot write the memory file for " + name + ": " + std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  ::dlerror();  // Clear any stale error.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const std::string reason = DlError();
    ::close(fd);
    return Error(InvalidArgument("cannot load " + name + " as a shared object: " + reason));
  }
  return InMemoryLibrary(handle, fd);
}

InMemoryLibrary::~InMemoryLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<LoadedExecutable>> LoadedExecutable::Load(std::string_view artifact_bytes) {
  HLOCACHE_ASSIGN_OR_RETURN(DecodedArtifact artifact, DecodeArtifact(artifact_bytes));
  const ArtifactHeader& h = artifact.header;
  if (h.payload_kind != kPayloadSharedObject) {
    return Error(FailedPrecondition("artifact " + h.key + " holds a '" + h.payload_kind +
                                    "' payload, which this loader cannot run"));
  }
  if (!RunsOnHost(h.target)) {
    return Error(FailedPrecondition("artifact " + h.key + " is built for " + h.target +
                                    ", which this host (" + HostCpuTarget() + ") cannot run"));
  }
  HLOCACHE_ASSIGN_OR_RETURN(InMemoryLibrary library,
                            InMemoryLibrary::Open(artifact.payload, "hlocache-" + h.key));
  ::dlerror();
  void* entry = ::dlsym(library.handle(), h.entry_symbol.c_str());
  if (entry == nullptr) {
    const std::string reason = DlError();
    return Error(InvalidArgument("artifact " + h.key + " has no entry symbol '" + h.entry_symbol +
                                 "': " + reason));
  }
  // An executable whose f32 dots may call BLAS gets this host's, or is refused here, at load,
  // rather than failing its first run.
  if (void* slot = ::dlsym(library.handle(), kBlasRuntimeSymbol); slot != nullptr) {
    auto blas = BlasRuntime();
    if (!blas) {
      return Error(
          FailedPrecondition("artifact " + h.key + " calls BLAS: " + blas.error().message()));
    }
    *static_cast<const hlocache_blas**>(slot) = *blas;
  }
  return std::unique_ptr<LoadedExecutable>(new LoadedExecutable(h, std::move(library), entry));
}

LoadedExecutable::~LoadedExecutable() = default;

Result<void*> LoadedExecutable::Symbol(const std::string& name) const {
  ::dlerror();
  void* sym = ::dlsym(library_.handle(), name.c_str());
  if (sym == nullptr) return Error(NotFound("no symbol '" + name + "' in " + header_.key));
  return sym;
}

}  // namespace hlocache::compiler
