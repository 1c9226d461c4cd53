#include "compiler/cuda/cuda_runtime.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "compiler/codegen/cpu_source.h"

namespace hlocache::compiler {
namespace {

// The driver entry points used here, with the C signatures of cuda.h (stable ABI: the _v2
// names are those of every driver since CUDA 4). Results are CUresult ints, 0 for success.
using CuDevicePtr = unsigned long long;
struct DriverApi {
  int (*init)(unsigned);
  int (*get_error_string)(int, const char**);
  int (*device_get_count)(int*);
  int (*device_get)(int*, int);
  int (*device_get_attribute)(int*, int, int);
  int (*device_get_name)(char*, int, int);
  int (*primary_ctx_retain)(void**, int);
  int (*primary_ctx_release)(int);
  int (*ctx_set_current)(void*);
  int (*ctx_synchronize)();
  int (*module_load_data)(void**, const void*);
  int (*module_unload)(void*);
  int (*module_get_function)(void**, void*, const char*);
  int (*mem_alloc)(CuDevicePtr*, size_t);
  int (*mem_free)(CuDevicePtr);
  int (*memcpy_htod)(CuDevicePtr, const void*, size_t);
  int (*memcpy_dtoh)(void*, CuDevicePtr, size_t);
  int (*memcpy_dtod)(CuDevicePtr, CuDevicePtr, size_t);
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       void*, void**, void**);
};

constexpr int kErrorNoDevice = 100;
constexpr int kAttributeComputeMajor = 75;
constexpr int kAttributeComputeMinor = 76;

template <class F>
bool Bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

Result<const DriverApi*> LoadDriver() {
  static std::once_flag once;
  static std::unique_ptr<Result<const DriverApi*>> outcome;
  std::call_once(once, [] {
    const char* env = std::getenv("HLOCACHE_CUDA_DRIVER_LIBRARY");
    const std::string name = env != nullptr && *env != 0 ? env : "libcuda.so.1";
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      outcome = std::make_unique<Result<const DriverApi*>>(Error(FailedPrecondition(
          "no CUDA driver: running a GPU executable needs an NVIDIA GPU and its driver (" +
          std::string(e != nullptr ? e : name) + ")")));
      return;
    }
    auto* api = new DriverApi();
    const bool ok =
        Bind(lib, "cuInit", api->init) && Bind(lib, "cuGetErrorString", api->get_error_string) &&
        Bind(lib, "cuDeviceGetCount", api->device_get_count) &&
        Bind(lib, "cuDeviceGet", api->device_get) &&
        Bind(lib, "cuDeviceGetAttribute", api->device_get_attribute) &&
        Bind(lib, "cuDeviceGetName", api->device_get_name) &&
        Bind(lib, "cuDevicePrimaryCtxRetain", api->primary_ctx_retain) &&
        Bind(lib, "cuDevicePrimaryCtxRelease_v2", api->primary_ctx_release) &&
        Bind(lib, "cuCtxSetCurrent", api->ctx_set_current) &&
        Bind(lib, "cuCtxSynchronize", api->ctx_synchronize) &&
        Bind(lib, "cuModuleLoadData", api->module_load_data) &&
        Bind(lib, "cuModuleUnload", api->module_unload) &&
        Bind(lib, "cuModuleGetFunction", api->module_get_function) &&
        Bind(lib, "cuMemAlloc_v2", api->mem_alloc) && Bind(lib, "cuMemFree_v2", api->mem_free) &&
        Bind(lib, "cuMemcpyHtoD_v2", api->memcpy_htod) &&
        Bind(lib, "cuMemcpyDtoH_v2", api->memcpy_dtoh) &&
        Bind(lib, "cuMemcpyDtoD_v2", api->memcpy_dtod) &&
        Bind(lib, "cuLaunchKernel", api->launch_kernel);
    if (!ok) {
      delete api;
      outcome = std::make_unique<Result<const DriverApi*>>(Error(
          FailedPrecondition("the CUDA driver " + name + " lacks the driver API hlocache uses")));
      return;
    }
    outcome = std::make_unique<Result<const DriverApi*>>(const_cast<const DriverApi*>(api));
  });
  return *outcome;
}

// Frees what a run allocated, whatever way it ends.
class Session {
 public:
  explicit Session(const DriverApi& api) : api_(api) {}
  ~Session() {
    for (CuDevicePtr p : buffers_) {
      if (p != 0) api_.mem_free(p);
    }
    if (module_ != nullptr) api_.module_unload(module_);
    if (context_ != nullptr) api_.primary_ctx_release(device_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Status Check(int result, const std::string& what) const {
    if (result == 0) return Status::Ok();
    const char* message = nullptr;
    api_.get_error_string(result, &message);
    return Internal(what + ": " +
                    (message != nullptr ? message : "CUDA error " + std::to_string(result)));
  }

  const DriverApi& api_;
  int device_ = 0;
  void* context_ = nullptr;
  void* module_ = nullptr;
  std::vector<CuDevicePtr> buffers_;
};

}  // namespace

Result<CudaRun> RunCudaPlan(const CudaPayload& payload, std::span<const std::string> inputs,
                            std::span<const hlo::Shape> results) {
  const CudaPlan& plan = payload.plan;
  if (inputs.size() != plan.parameters.size() || results.size() != plan.results.size()) {
    return Error(InvalidArgument(
        "the executable takes " + std::to_string(plan.parameters.size()) +
        " parameter leaves and gives " + std::to_string(plan.results.size()) + " results, not " +
        std::to_string(inputs.size()) + " and " + std::to_string(results.size())));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int64_t room = plan.buffer_bytes[static_cast<size_t>(plan.parameters[k])];
    if (static_cast<int64_t>(inputs[k].size()) > room) {
      return Error(InvalidArgument("parameter leaf " + std::to_string(k) + " has " +
                                   std::to_string(inputs[k].size()) + " bytes; its buffer " +
                                   std::to_string(room)));
    }
  }
  HLOCACHE_ASSIGN_OR_RETURN(const DriverApi* api, LoadDriver());
  Session s(*api);
  if (int r = api->init(0); r != 0) {
    if (r == kErrorNoDevice) {
      return Error(FailedPrecondition("no GPU: the CUDA driver finds no device to run this " +
                                      plan.arch + " executable on"));
    }
    HLOCACHE_RETURN_IF_ERROR(s.Check(r, "cuInit"));
  }
  int count = 0;
  HLOCACHE_RETURN_IF_ERROR(s.Check(api->device_get_count(&count), "cuDeviceGetCount"));
  if (count == 0) return Error(FailedPrecondition("no GPU: the CUDA driver finds no device"));
  HLOCACHE_RETURN_IF_ERROR(s.Check(api->device_get(&s.device_, 0), "cuDeviceGet"));
  int major = 0, minor = 0;
  HLOCACHE_RETURN_IF_ERROR(
      s.Check(api->device_get_attribute(&major, kAttributeComputeMajor, s.device_),
              "cuDeviceGetAttribute"));
  HLOCACHE_RETURN_IF_ERROR(
      s.Check(api->device_get_attribute(&minor, kAttributeComputeMinor, s.device_),
              "cuDeviceGetAttribute"));
  char name[256] = {};
  api->device_get_name(name, sizeof name - 1, s.device_);
  const std::string device_arch = "sm_" + std::to_string(major * 10 + minor);
  // A cubin runs on GPUs of its major version and a minor version at least its own.
  const int plan_sm = std::atoi(plan.arch.c_str() + (plan.arch.size() > 3 ? 3 : 0));
  if (major != plan_sm / 10 || minor < plan_sm % 10) {
    return Error(FailedPrecondition("this executable is for " + plan.arch + "; GPU 0 (" + name +
                                    ") is " + device_arch));
  }
  HLOCACHE_RETURN_IF_ERROR(
      s.Check(api->primary_ctx_retain(&s.context_, s.device_), "cuDevicePrimaryCtxRetain"));
  HLOCACHE_RETURN_IF_ERROR(s.Check(api->ctx_set_current(s.context_), "cuCtxSetCurrent"));
  HLOCACHE_RETURN_IF_ERROR(
      s.Check(api->module_load_data(&s.module_, payload.cubin.data()), "cuModuleLoadData"));

  const auto start = std::chrono::steady_clock::now();
  s.buffers_.assign(plan.buffer_bytes.size(), 0);
  for (size_t b = 0; b < plan.buffer_bytes.size(); ++b) {
    HLOCACHE_RETURN_IF_ERROR(s.Check(
        api->mem_alloc(&s.buffers_[b], static_cast<size_t>(plan.buffer_bytes[b])), "cuMemAlloc"));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].empty()) continue;
    HLOCACHE_RETURN_IF_ERROR(
        s.Check(api->memcpy_htod(s.buffers_[static_cast<size_t>(plan.parameters[k])],
                                 inputs[k].data(), inputs[k].size()),
                "cuMemcpyHtoD"));
  }
  for (const CudaStep& step : plan.steps) {
    if (step.kernel.empty()) {
      HLOCACHE_RETURN_IF_ERROR(s.Check(api->memcpy_dtod(s.buffers_[static_cast<size_t>(step.to)],
                                                        s.buffers_[static_cast<size_t>(step.from)],
                                                        static_cast<size_t>(step.bytes)),
                                       "cuMemcpyDtoD"));
      continue;
    }
    void* function = nullptr;
    HLOCACHE_RETURN_IF_ERROR(
        s.Check(api->module_get_function(&function, s.module_, step.kernel.c_str()),
                "cuModuleGetFunction " + step.kernel));
    std::vector<CuDevicePtr> args;
    for (int64_t a : step.args) args.push_back(s.buffers_[static_cast<size_t>(a)]);
    std::vector<void*> params;
    for (CuDevicePtr& a : args) params.push_back(&a);
    auto u = [](int64_t v) { return static_cast<unsigned>(v); };
    HLOCACHE_RETURN_IF_ERROR(
        s.Check(api->launch_kernel(function, u(step.grid[0]), u(step.grid[1]), u(step.grid[2]),
                                   u(step.block[0]), u(step.block[1]), u(step.block[2]), 0, nullptr,
                                   params.data(), nullptr),
                "cuLaunchKernel " + step.kernel));
  }
  HLOCACHE_RETURN_IF_ERROR(s.Check(api->ctx_synchronize(), "the executable's kernels"));
  CudaRun run;
  for (size_t k = 0; k < results.size(); ++k) {
    std::string bytes(static_cast<size_t>(ByteCount(results[k])), '\0');
    const int64_t room = plan.buffer_bytes[static_cast<size_t>(plan.results[k])];
    if (static_cast<int64_t>(bytes.size()) > room) {
      return Error(InvalidArgument("result " + std::to_string(k) + " is larger than its buffer"));
    }
    if (!bytes.empty()) {
      HLOCACHE_RETURN_IF_ERROR(
          s.Check(api->memcpy_dtoh(bytes.data(), s.buffers_[static_cast<size_t>(plan.results[k])],
                                   bytes.size()),
                  "cuMemcpyDtoH"));
    }
    run.results.push_back(std::move(bytes));
  }
  run.run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.device = std::string(name) + " (" + device_arch + ")";
  return run;
}

}  // namespace hlocache::compiler
