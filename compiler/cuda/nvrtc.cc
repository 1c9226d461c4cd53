#include "compiler/cuda/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace hlocache::compiler {

// The few entry points hlocache uses, with NVRTC's C signatures (nvrtc.h, stable across
// releases): results are ints, 0 for success; programs are opaque pointers.
struct Nvrtc::Api {
  using Program = void*;
  const char* (*get_error_string)(int);
  int (*version)(int*, int*);
  int (*create_program)(Program*, const char*, const char*, int, const char* const*,
                        const char* const*);
  int (*destroy_program)(Program*);
  int (*compile_program)(Program, int, const char* const*);
  int (*get_cubin_size)(Program, size_t*);
  int (*get_cubin)(Program, char*);
  int (*get_log_size)(Program, size_t*);
  int (*get_log)(Program, char*);
};

namespace {

template <class F>
bool Bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

Result<const Nvrtc*> Load(Nvrtc* out, Nvrtc::Api* api, std::string* version) {
  std::vector<std::string> names;
  if (const char* env = std::getenv("HLOCACHE_NVRTC_LIBRARY"); env != nullptr && *env != 0) {
    names.push_back(env);
  } else {
    names = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  }
  void* lib = nullptr;
  std::string why;
  for (const std::string& name : names) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* e = dlerror();
    if (why.empty()) why = e != nullptr ? e : name + ": cannot be loaded";
  }
  if (lib == nullptr) {
    return Error(FailedPrecondition("NVRTC is missing (CUDA targets need it to compile): " + why));
  }
  const bool ok = Bind(lib, "nvrtcGetErrorString", api->get_error_string) &&
                  Bind(lib, "nvrtcVersion", api->version) &&
                  Bind(lib, "nvrtcCreateProgram", api->create_program) &&
                  Bind(lib, "nvrtcDestroyProgram", api->destroy_program) &&
                  Bind(lib, "nvrtcCompileProgram", api->compile_program) &&
                  Bind(lib, "nvrtcGetCUBINSize", api->get_cubin_size) &&
                  Bind(lib, "nvrtcGetCUBIN", api->get_cubin) &&
                  Bind(lib, "nvrtcGetProgramLogSize", api->get_log_size) &&
                  Bind(lib, "nvrtcGetProgramLog", api->get_log);
  if (!ok) {
    return Error(
        FailedPrecondition("NVRTC is too old (no cubin output): " + std::string(names.front())));
  }
  int major = 0, minor = 0;
  if (api->version(&major, &minor) != 0) {
    return Error(FailedPrecondition("NVRTC does not say its version"));
  }
  *version = std::to_string(major) + "." + std::to_string(minor);
  return const_cast<const Nvrtc*>(out);
}

}  // namespace

Result<const Nvrtc*> Nvrtc::Get() {
  static std::once_flag once;
  static Nvrtc* instance = nullptr;
  static std::unique_ptr<Result<const Nvrtc*>> outcome;
  std::call_once(once, [] {
    instance = new Nvrtc();
    auto* api = new Api();
    instance->api_ = api;
    outcome = std::make_unique<Result<const Nvrtc*>>(Load(instance, api, &instance->version_));
  });
  return *outcome;
}

Result<std::string> Nvrtc::CompileToCubin(std::string_view source, std::string_view arch,
                                          std::string_view name) const {
  const Api& a = *api_;
  Api::Program program = nullptr;
  const std::string text(source), file(name);
  if (int r = a.create_program(&program, text.c_str(), file.c_str(), 0, nullptr, nullptr); r != 0) {
    return Error(Internal(std::string("nvrtcCreateProgram: ") + a.get_error_string(r)));
  }
  const std::string arch_flag = "--gpu-architecture=" + std::string(arch);
  // Round-to-nearest division and square root, no flush of subnormals, no fused multiply-add
  // that would skip a rounding: the semantics of the reference interpreter.
  const char* options[] = {arch_flag.c_str(), "--std=c++17",      "-default-device", "--fmad=false",
                           "--prec-div=true", "--prec-sqrt=true", "--ftz=false"};
  const int compiled = a.compile_program(program, static_cast<int>(std::size(options)), options);
  std::string log;
  size_t log_size = 0;
  if (a.get_log_size(program, &log_size) == 0 && log_size > 1) {
    log.resize(log_size);
    a.get_log(program, log.data());
    log.resize(log_size - 1);
  }
  std::string cubin;
  size_t size = 0;
  if (compiled == 0 && a.get_cubin_size(program, &size) == 0) {
    cubin.resize(size);
    if (a.get_cubin(program, cubin.data()) != 0) cubin.clear();
  }
  a.destroy_program(&program);
  if (compiled != 0) {
    // The first lines of the log say what went wrong.
    size_t cut = 0;
    for (int lines = 0; lines < 8 && cut != std::string::npos; ++lines) {
      cut = log.find('\n', cut == 0 ? 0 : cut + 1);
    }
    return Error(Internal("NVRTC failed (" + std::string(a.get_error_string(compiled)) +
                          "): " + log.substr(0, cut)));
  }
  if (cubin.empty()) return Error(Internal("NVRTC produced no cubin for " + std::string(arch)));
  return cubin;
}

}  // namespace hlocache::compiler
