// The cost of a miss against the cost of a hit, on corpus modules of rising size: compiling in
// a worker process (what a miss costs the fleet once), the artifact's size, loading it from
// memory (what a hit costs each process), running it, and running the same inputs through the
// reference interpreter (what executing without a compiler would cost), side by side.
//
// Usage: compile_bench [CORPUS_DIR]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "client/keying.h"
#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/arguments.h"
#include "compiler/interp/interpreter.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "compiler/worker_pool.h"

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

}  // namespace

int main(int argc, char** argv) {
  using namespace hlocache;
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
    client::KeySettings settings;
    settings.compiler_id = toolchain->CompilerId();
    auto keyed = client::KeyModule(*module, settings);
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
  return 0;
}
