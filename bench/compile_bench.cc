// The cost of a miss against the cost of a hit, on corpus modules of rising size: compiling in
// a worker process (what a miss costs the fleet once), the artifact's size, loading it from
// memory (what a hit costs each process), running it, and running the same inputs through the
// reference interpreter (what executing without a compiler would cost), side by side.
// Then real models too big to run here (Gemma 4 2B, mobilenet_v2's training step): compile and
// load only. Then a kernel table: f32 dots of 256, 512 and 1024 cubed, a row reduction and a fused
// elementwise chain, generated code against the interpreter and, for the dots, against
// OpenBLAS's sgemm on one thread (through the BLAS the loader gives executables; `make bench`
// installs it) on the same inputs. Last, GPU executables built here without a GPU: NVRTC's
// compile for cuda-sm_80 and cuda-sm_90 beside the CPU compile of the same module.
//
// Usage: compile_bench [CORPUS_DIR [gpu]]   ("gpu": the GPU table alone)

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/artifact/blas_runtime.h"
#include "compiler/artifact/cuda_payload.h"
#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "compiler/worker_pool.h"
#include "keying/keying.h"

#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "../shared/corpus"
#endif
#ifndef HLOCACHE_BINARY
#define HLOCACHE_BINARY "hlocache"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// Best of `runs` timings of fn, in ms.
template <typename Fn>
double BestMs(int runs, Fn fn) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    if (!fn()) return -1;
    best = std::min(best, Ms(t0));
  }
  return best;
}

// The host's sgemm, through the BLAS the loader gives executables (one thread a call here), or
// null when the host has none.
const hlocache_blas* HostBlas() {
  auto blas = hlocache::compiler::BlasRuntime();
  return blas ? *blas : nullptr;
}

struct Kernel {
  std::string name;
  std::string hlo;
  int dot = 0;  // n for an n x n x n dot, else 0.
};

std::vector<Kernel> Kernels() {
  std::vector<Kernel> out;
  for (int n : {256, 512, 1024}) {
    const std::string s = "f32[" + std::to_string(n) + "," + std::to_string(n) + "]";
    out.push_back({"dot " + std::to_string(n) + "^3 f32",
                   "HloModule dot\n\nENTRY e {\n  a = " + s + " parameter(0)\n  b = " + s +
                       " parameter(1)\n  ROOT d = " + s +
                       " dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
                   n});
  }
  out.push_back({"reduce f32[4096,4096] rows (add)",
                 "HloModule reduce\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                 "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  a = f32[4096,4096] parameter(0)\n"
                 "  z = f32[] constant(0)\n  ROOT r = f32[4096] reduce(a, z), dimensions={1}, "
                 "to_apply=add\n}\n"});
  out.push_back({"elementwise chain f32[16M] (6 ops)",
                 "HloModule chain\n\nENTRY e {\n  a = f32[16777216] parameter(0)\n"
                 "  b = f32[16777216] parameter(1)\n  m = f32[16777216] multiply(a, b)\n"
                 "  s = f32[16777216] add(m, a)\n  t = f32[16777216] tanh(s)\n"
                 "  x = f32[16777216] maximum(t, b)\n  d = f32[16777216] subtract(x, a)\n"
                 "  ROOT n = f32[16777216] negate(d)\n}\n"});
  return out;
}

// The generated code's and the interpreter's times for each kernel, and OpenBLAS's for the dots.
void KernelTable(hlocache::compiler::WorkerPool& pool, const std::string& compiler_id) {
  using namespace hlocache;
  const hlocache_blas* blas = HostBlas();
  std::printf(
      "\nKernels: generated code against the interpreter and, for dots, OpenBLAS sgemm "
      "(one thread%s); best of 3 runs, the interpreter once.\n\n",
      blas != nullptr ? "" : "; no BLAS library found, install libopenblas0");
  std::printf(
      "| kernel | generated ms | GFLOP/s | interpreter ms | OpenBLAS ms | generated / "
      "OpenBLAS |\n|---|---:|---:|---:|---:|---:|\n");
  for (const Kernel& k : Kernels()) {
    auto module = hlo::ParseModule(k.hlo, k.name);
    if (!module) {
      std::printf("| %s | (%s) |\n", k.name.c_str(), module.error().message().c_str());
      continue;
    }
    keying::KeySettings settings;
    settings.compiler_id = compiler_id;
    auto keyed = keying::KeyModule(*module, settings);
    if (!keyed) continue;
    auto compiled = pool.Compile({keyed->key.text, std::string(module->source()), "", k.name});
    if (!compiled) {
      std::printf("| %s | compile failed: %s |\n", k.name.c_str(),
                  compiled.error().message().c_str());
      continue;
    }
    auto exe = compiler::LoadedExecutable::Load(compiled->artifact);
    auto abi = compiler::EntryLeavesOf(*module);
    auto args = interp::MakeArguments(*module, interp::ArgumentFill::kRandom, 11);
    if (!exe || !abi || !args) continue;
    std::vector<std::string> generated;
    const double run_ms = BestMs(3, [&] {
      auto ran = compiler::Execute(**exe, *abi, *args);
      if (ran) generated = std::move(*ran);
      return ran.has_value();
    });
    const double interp_ms =
        BestMs(1, [&] { return interp::Evaluate(*module, *args).has_value(); });
    const double flops = k.dot ? 2.0 * k.dot * k.dot * k.dot : 0;
    std::string blas_ms = "", ratio = "";
    if (k.dot && blas != nullptr && !generated.empty()) {
      const std::string a = interp::ToBytes((*args)[0]), b = interp::ToBytes((*args)[1]);
      std::vector<float> c(static_cast<size_t>(k.dot) * k.dot);
      const double ms = BestMs(3, [&] {
        return blas->sgemm(1, 0, 0, k.dot, k.dot, k.dot, reinterpret_cast<const float*>(a.data()),
                           k.dot, reinterpret_cast<const float*>(b.data()), k.dot, c.data(),
                           k.dot) == 0;
      });
      // The same product, or the comparison means nothing.
      const auto* ours = reinterpret_cast<const float*>(generated[0].data());
      double worst = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(ours[i]) - c[i]) /
                                    std::max(1.0, std::fabs(static_cast<double>(c[i]))));
      }
      char text[64];
      std::snprintf(text, sizeof text, "%.2f", ms);
      blas_ms = text;
      std::snprintf(text, sizeof text, "%.1fx%s", run_ms / ms,
                    worst > 1e-3 ? " (results differ)" : "");
      ratio = text;
    }
    char gflops[32] = "";
    if (flops > 0) std::snprintf(gflops, sizeof gflops, "%.1f", flops / (run_ms * 1e6));
    std::printf("| %s | %.2f | %s | %.1f | %s | %s |\n", k.name.c_str(), run_ms, gflops, interp_ms,
                blas_ms.c_str(), ratio.c_str());
    std::fflush(stdout);
  }
}

}  // namespace

// One compile in a worker process of `path` for `target` (empty: this host's CPU): seconds and
// the artifact, or the error.
struct Built {
  double seconds = 0;
  std::string artifact;
  std::string error;
};
Built CompileFor(hlocache::compiler::WorkerPool& pool, const hlocache::hlo::Module& module,
                 const fs::path& path, const std::string& target, const std::string& cpu_id) {
  using namespace hlocache;
  keying::KeySettings settings;
  settings.target = target;
  settings.compiler_id = compiler::CompilerIdFor(target, cpu_id);
  auto keyed = keying::KeyModule(module, settings);
  if (!keyed) return {0, "", keyed.error().message()};
  const auto t0 = Clock::now();
  auto compiled =
      pool.Compile({keyed->key.text, std::string(module.source()), target, path.string()});
  const double seconds = Ms(t0) / 1000;
  if (!compiled) return {seconds, "", compiled.error().message()};
  return {seconds, std::move(compiled->artifact), ""};
}

// GPU executables built on this machine, which has no GPU: NVRTC beside the CPU compile.
void GpuTable(hlocache::compiler::WorkerPool& pool, const fs::path& corpus,
              const std::vector<std::string>& modules, const std::string& cpu_id) {
  using namespace hlocache;
  auto nvrtc = compiler::Nvrtc::Get();
  if (!nvrtc) {
    std::printf("\nGPU table skipped: %s\n", nvrtc.error().message().c_str());
    return;
  }
  std::printf("\nGPU executables, built without a GPU (%s):\n\n",
              compiler::CudaCompilerId().c_str());
  std::printf(
      "| module | CPU compile s | sm_80 compile s | sm_90 compile s | kernels | cubin KB (sm_90) "
      "| plan KB |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& rel : modules) {
    const fs::path path = corpus / rel;
    auto module = hlo::ParseModuleFile(path.string());
    if (!module) continue;
    const Built cpu = CompileFor(pool, *module, path, "", cpu_id);
    const Built sm80 = CompileFor(pool, *module, path, "cuda-sm_80", cpu_id);
    const Built sm90 = CompileFor(pool, *module, path, "cuda-sm_90", cpu_id);
    const std::string name = fs::path(rel).filename().string();
    if (!sm90.error.empty() || !sm80.error.empty()) {
      std::printf("| %s | %.2f | (%s) |\n", name.c_str(), cpu.seconds,
                  (sm90.error.empty() ? sm80.error : sm90.error).c_str());
      continue;
    }
    auto decoded = compiler::DecodeArtifact(sm90.artifact);
    if (!decoded) continue;
    auto payload = compiler::DecodeCudaPayload(decoded->payload);
    if (!payload) continue;
    size_t kernels = 0;
    for (const auto& step : payload->plan.steps) kernels += step.kernel.empty() ? 0 : 1;
    const double plan_kb =
        static_cast<double>(decoded->payload.size() - payload->cubin.size()) / 1024.0;
    std::printf("| %s | %.2f | %.2f | %.2f | %zu | %.0f | %.1f |\n", name.c_str(), cpu.seconds,
                sm80.seconds, sm90.seconds, kernels, payload->cubin.size() / 1024.0, plan_kb);
    std::fflush(stdout);
  }
}

int main(int argc, char** argv) {
  using namespace hlocache;
  // Every compile measured runs the compiler: none is taken from the object cache (the
  // workers, its children, inherit this).
  ::setenv("HLOCACHE_OBJECT_CACHE", "-", 1);
  const fs::path corpus = argc > 1 ? argv[1] : HLOCACHE_CORPUS_DIR;
  const std::vector<std::string> modules = {
      "hlo/xla__hlo__translate__hlo_to_mhlo__tests__fusion.hlo",
      "hlo/xla__backends__cpu__benchmarks__hlo__dynamic_slice_loop_1x2048x768_bf16.hlo",
      "hlo/xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo",
      "torch_xla/bert__bert_single_graph_2.hlo",
      "hlo/xla__tools__hlo_opt__tests__cpu_hlo.hlo",
  };
  auto toolchain = compiler::Toolchain::Probe(compiler::ToolchainOptions());
  if (!toolchain) {
    std::fprintf(stderr, "compile_bench: %s\n", toolchain.error().ToString().c_str());
    return 1;
  }
  compiler::WorkerPoolOptions options;
  options.worker_binary = HLOCACHE_BINARY;
  compiler::WorkerPool pool(options);

  if (argc > 2 && std::string(argv[2]) == "gpu") {
    GpuTable(pool, corpus, modules, toolchain->CompilerId());
    return 0;
  }
  std::printf("compile_bench: %s, target %s, one worker process per compile\n\n",
              toolchain->CompilerId().c_str(), compiler::HostCpuTarget().c_str());
  std::printf(
      "| module | HLO KB | compile s (miss) | artifact KB | load ms (hit) | run ms | "
      "interpreter ms | run speed-up |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& rel : modules) {
    const fs::path path = corpus / rel;
    auto module = hlo::ParseModuleFile(path.string());
    if (!module) {
      std::printf("| %s | (%s) |\n", rel.c_str(), module.error().message().c_str());
      continue;
    }
    keying::KeySettings settings;
    settings.compiler_id = toolchain->CompilerId();
    auto keyed = keying::KeyModule(*module, settings);
    if (!keyed) continue;
    const auto t0 = Clock::now();
    auto compiled =
        pool.Compile({keyed->key.text, std::string(module->source()), "", path.string()});
    const double compile_ms = Ms(t0);
    if (!compiled) {
      std::printf("| %s | compile failed: %s |\n", rel.c_str(), compiled.error().message().c_str());
      continue;
    }
    std::unique_ptr<compiler::LoadedExecutable> exe;
    const double load_ms = BestMs(5, [&] {
      auto loaded = compiler::LoadedExecutable::Load(compiled->artifact);
      if (!loaded) return false;
      exe = std::move(*loaded);
      return true;
    });
    auto abi = compiler::EntryLeavesOf(*module);
    auto args = interp::MakeArguments(*module, interp::ArgumentFill::kRandom, 7);
    if (!exe || !abi || !args) continue;
    const double run_ms =
        BestMs(3, [&] { return compiler::Execute(*exe, *abi, *args).has_value(); });
    const double interp_ms =
        BestMs(1, [&] { return interp::Evaluate(*module, *args).has_value(); });
    std::printf("| %s | %.0f | %.2f | %.0f | %.2f | %.2f | %.1f | %.0fx |\n",
                fs::path(rel).filename().c_str(), module->source().size() / 1024.0,
                compile_ms / 1000, compiled->artifact.size() / 1024.0, load_ms, run_ms, interp_ms,
                interp_ms / std::max(run_ms, 1e-3));
    std::fflush(stdout);
  }
  // Real models whose weights alone are gigabytes: what a compile costs and what a hit loads.
  const std::vector<std::string> models = {
      "hlo/xla__tools__benchmarks__hlo__hlo_gemma4_2b_bf16.hlo",
      "hlo/xla__tools__data__benchmarking__mobilenet_v2.hlo",
  };
  std::printf(
      "\n| real model (compiled, not run) | HLO KB | instructions | compile s (miss) | "
      "artifact KB | load ms (hit) |\n|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& rel : models) {
    const fs::path path = corpus / rel;
    auto module = hlo::ParseModuleFile(path.string());
    if (!module) {
      std::printf("| %s | (%s) |\n", rel.c_str(), module.error().message().c_str());
      continue;
    }
    size_t instructions = 0;
    for (const auto& c : module->computations) instructions += c.instructions.size();
    keying::KeySettings settings;
    settings.compiler_id = toolchain->CompilerId();
    auto keyed = keying::KeyModule(*module, settings);
    if (!keyed) continue;
    const auto t0 = Clock::now();
    auto compiled =
        pool.Compile({keyed->key.text, std::string(module->source()), "", path.string()});
    const double compile_ms = Ms(t0);
    if (!compiled) {
      std::printf("| %s | compile failed: %s |\n", rel.c_str(), compiled.error().message().c_str());
      continue;
    }
    const double load_ms =
        BestMs(5, [&] { return compiler::LoadedExecutable::Load(compiled->artifact).has_value(); });
    std::printf("| %s | %.0f | %zu | %.2f | %.0f | %.2f |\n", fs::path(rel).filename().c_str(),
                module->source().size() / 1024.0, instructions, compile_ms / 1000,
                compiled->artifact.size() / 1024.0, load_ms);
    std::fflush(stdout);
  }
  KernelTable(pool, toolchain->CompilerId());
  GpuTable(pool, corpus, modules, toolchain->CompilerId());
  return 0;
}
