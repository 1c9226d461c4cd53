#include "tests/unit/compiler/cuda_emulation.h"

#include <dlfcn.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "compiler/artifact/loader.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/cuda/cuda_prelude.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"

namespace hlocache::compiler {
namespace {

// What CUDA C++ gives device code, in host C++. Kernels read their thread's coordinates from
// thread-local variables the runner sets before each block.
constexpr const char* kShim = R"(#include <math.h>
#include <stdint.h>
#include <string.h>
#define HC_HOST_INTEGER_TYPES
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define HC_EXPORT extern "C" __attribute__((visibility("default")))
struct hc_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local hc_dim3 threadIdx, blockIdx;
inline hc_dim3 blockDim, gridDim;
inline void (*hc_sync_hook)() = nullptr;
inline void __syncthreads() { hc_sync_hook(); }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, 8); return f; }
inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
HC_EXPORT void hc_emu_dims(const unsigned* grid, const unsigned* block, void (*sync)()) {
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block[0], block[1], block[2]};
  hc_sync_hook = sync;
}
HC_EXPORT void hc_emu_thread(const unsigned* thread, const unsigned* block) {
  threadIdx = {thread[0], thread[1], thread[2]};
  blockIdx = {block[0], block[1], block[2]};
}
)";

std::barrier<>* g_barrier = nullptr;  // The block being run's; launches run one at a time.
void Sync() { g_barrier->arrive_and_wait(); }

// `extern "C" void call_kN(void* const* a) { kN((T0*)a[0], ...); }` for each kernel, from the
// generated signatures ("T* __restrict__ bN" or "const T* __restrict__ bN", comma-separated).
// `synchronizing` gets the kernels whose threads meet at __syncthreads.
Result<std::string> Adapters(const CudaProgram& program, std::vector<std::string>& synchronizing) {
  std::string out;
  std::vector<std::string> done;
  for (const CudaStep& step : program.plan.steps) {
    if (step.kernel.empty() || std::find(done.begin(), done.end(), step.kernel) != done.end()) {
      continue;
    }
    done.push_back(step.kernel);
    const std::string opening = " " + step.kernel + "(";
    const size_t at = program.source.find(opening);
    if (at == std::string::npos) return Error(NotFound("no kernel " + step.kernel));
    const size_t begin = at + opening.size();
    const size_t end = program.source.find(')', begin);
    const size_t next = program.source.find("extern \"C\"", end);
    if (program.source.substr(end, next == std::string::npos ? next : next - end)
            .find("__syncthreads") != std::string::npos) {
      synchronizing.push_back(step.kernel);
    }
    std::string params = program.source.substr(begin, end - begin);
    std::string call =
        "HC_EXPORT void call_" + step.kernel + "(void* const* a) {\n  " + step.kernel + "(";
    size_t k = 0, from = 0;
    while (from < params.size()) {
      size_t comma = params.find(", ", from);
      if (comma == std::string::npos) comma = params.size();
      const std::string param = params.substr(from, comma - from);
      const size_t restrict_at = param.find("__restrict__");
      if (restrict_at == std::string::npos) return Error(Internal("parameter " + param));
      call += std::string(k ? ", " : "") + "(" + param.substr(0, restrict_at) + ")a[" +
              std::to_string(k) + "]";
      ++k;
      from = comma + 2;
    }
    if (k != step.args.size()) {
      return Error(Internal(step.kernel + " takes " + std::to_string(k) + " buffers; the plan " +
                            "passes " + std::to_string(step.args.size())));
    }
    out += call + ");\n}\n";
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> EmulateCudaProgram(const CudaProgram& program,
                                                    std::span<const std::string> inputs,
                                                    std::span<const hlo::Shape> results) {
  const CudaPlan& plan = program.plan;
  if (inputs.size() != plan.parameters.size() || results.size() != plan.results.size()) {
    return Error(InvalidArgument("inputs or results do not match the plan"));
  }
  std::vector<std::string> synchronizing;
  HLOCACHE_ASSIGN_OR_RETURN(std::string adapters, Adapters(program, synchronizing));
  HLOCACHE_ASSIGN_OR_RETURN(Toolchain toolchain, Toolchain::Probe({}));
  // The shim and the CUDA prelude begin every emulated program: compiled once (prelude_cache.h).
  static const std::string* const prelude = new std::string(std::string(kShim) + CudaUnitPrelude());
  const std::vector<std::string> units = {std::string(kShim) + program.source + adapters};
  HLOCACHE_ASSIGN_OR_RETURN(std::string so,
                            toolchain.CompileSharedObject(units, HostCpuTarget(), *prelude));
  HLOCACHE_ASSIGN_OR_RETURN(InMemoryLibrary lib, InMemoryLibrary::Open(so, "cuda-emulation"));
  auto dims = reinterpret_cast<void (*)(const unsigned*, const unsigned*, void (*)())>(
      dlsym(lib.handle(), "hc_emu_dims"));
  auto thread = reinterpret_cast<void (*)(const unsigned*, const unsigned*)>(
      dlsym(lib.handle(), "hc_emu_thread"));
  if (dims == nullptr || thread == nullptr) return Error(Internal("the shim did not load"));

  // Device memory: each buffer, zeroed where the program does not write it (a GPU's would hold
  // garbage; zeros here let a missed write show as a mismatch rather than luck).
  std::vector<std::string> buffers;
  for (int64_t bytes : plan.buffer_bytes) buffers.emplace_back(static_cast<size_t>(bytes), '\0');
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::string& b = buffers[static_cast<size_t>(plan.parameters[k])];
    if (inputs[k].size() > b.size())
      return Error(InvalidArgument("an input larger than its buffer"));
    std::memcpy(b.data(), inputs[k].data(), inputs[k].size());
  }
  for (const CudaStep& step : plan.steps) {
    if (step.kernel.empty()) {
      std::memcpy(buffers[static_cast<size_t>(step.to)].data(),
                  buffers[static_cast<size_t>(step.from)].data(), static_cast<size_t>(step.bytes));
      continue;
    }
    auto call = reinterpret_cast<void (*)(void* const*)>(
        dlsym(lib.handle(), ("call_" + step.kernel).c_str()));
    if (call == nullptr) return Error(NotFound("no kernel " + step.kernel + " in the program"));
    std::vector<void*> args;
    for (int64_t a : step.args) args.push_back(buffers[static_cast<size_t>(a)].data());
    const unsigned grid[3] = {static_cast<unsigned>(step.grid[0]),
                              static_cast<unsigned>(step.grid[1]),
                              static_cast<unsigned>(step.grid[2])};
    const unsigned block[3] = {static_cast<unsigned>(step.block[0]),
                               static_cast<unsigned>(step.block[1]),
                               static_cast<unsigned>(step.block[2])};
    dims(grid, block, &Sync);
    if (std::find(synchronizing.begin(), synchronizing.end(), step.kernel) == synchronizing.end()) {
      // Threads that never meet run one after another.
      for (unsigned z = 0; z < grid[2]; ++z) {
        for (unsigned y = 0; y < grid[1]; ++y) {
          for (unsigned x = 0; x < grid[0]; ++x) {
            const unsigned at[3] = {x, y, z};
            for (unsigned t = 0; t < block[0] * block[1] * block[2]; ++t) {
              const unsigned id[3] = {t % block[0], t / block[0] % block[1],
                                      t / (block[0] * block[1])};
              thread(id, at);
              call(args.data());
            }
          }
        }
      }
      continue;
    }
    const auto threads = static_cast<ptrdiff_t>(block[0] * block[1] * block[2]);
    std::barrier<> barrier(threads);
    g_barrier = &barrier;
    std::vector<std::thread> pool;
    for (ptrdiff_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const unsigned id[3] = {static_cast<unsigned>(t) % block[0],
                                static_cast<unsigned>(t) / block[0] % block[1],
                                static_cast<unsigned>(t) / (block[0] * block[1])};
        // Blocks one after another; every thread finishes a block before any starts the next
        // (their __shared__ arrays are the block's).
        for (unsigned z = 0; z < grid[2]; ++z) {
          for (unsigned y = 0; y < grid[1]; ++y) {
            for (unsigned x = 0; x < grid[0]; ++x) {
              const unsigned at[3] = {x, y, z};
              thread(id, at);
              call(args.data());
              barrier.arrive_and_wait();
            }
          }
        }
      });
    }
    for (std::thread& t : pool) t.join();
    g_barrier = nullptr;
  }
  std::vector<std::string> out;
  for (size_t k = 0; k < results.size(); ++k) {
    const std::string& b = buffers[static_cast<size_t>(plan.results[k])];
    out.push_back(b.substr(0, static_cast<size_t>(ByteCount(results[k]))));
  }
  return out;
}

}  // namespace hlocache::compiler
