// Every corpus module that a CPU compiler could be asked to build (no custom-call, no elided
// constants, no collective of more than one participant) is lowered; those the code generator
// supports are compiled by real `hlocache compile-worker` processes, loaded from memory, run on
// seeded random inputs and compared with the reference interpreter. The test prints how many
// compiled and the reason for each exception, and fails below a floor on that share, on any
// module of the core op set that does not compile, and on any mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/cuda/cuda_codegen.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/hlo/collectives.h"
#include "compiler/hlo/convolution_dims.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/window.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/semantics/literal.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "compiler/worker_pool.h"
#include "keying/keying.h"
#include "tests/unit/compiler/corpus_files.h"
#include "tests/unit/compiler/cuda_emulation.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "../shared/corpus"
#endif
#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

// Buffers above this are compiled but not run (the bound for running).
constexpr uint64_t kRunBufferLimit = uint64_t{2} << 30;
// Nor is one whose element operations (InterpreterWork, a loop's body counted once) exceed this:
// some 2 minutes of compiled code here (mobilenet_v2's training step, 10^11, takes 82 s). An
// fp8 GEMM benchmark's loop of 275 * 10^9 multiply-adds an iteration would take hours.
constexpr uint64_t kRunWorkLimit = uint64_t{1} << 37;

// Modules estimated above this many interpreter operations are compiled and run, but checked
// against the interpreter only by `hlocache run --check`, outside the suite. The plain build's
// budget covers every module of the corpus: the largest, sharded_computation.hlo (about 2^35
// multiply-adds of attention), takes the interpreter about 40 s and 6 GB. The sanitizer
// build's is far smaller, since the interpreter runs there at a tenth of the speed or less.
#ifndef HLOCACHE_CORPUS_INTERPRETER_BUDGET
#define HLOCACHE_CORPUS_INTERPRETER_BUDGET (uint64_t{1} << 36)
#endif
constexpr uint64_t kInterpreterBudget = HLOCACHE_CORPUS_INTERPRETER_BUDGET;
// Every module is lowered; every Nth is also compiled and run. The sanitizer build lowers all
// of them (the code generator is what it instruments) and compiles a third: the C++ compiler's
// work is the same in both builds, and the plain build compiles every one.
#ifndef HLOCACHE_CORPUS_COMPILE_STRIDE
#define HLOCACHE_CORPUS_COMPILE_STRIDE 1
#endif
constexpr size_t kCompileStride = HLOCACHE_CORPUS_COMPILE_STRIDE;
#ifndef HLOCACHE_CORPUS_MIN_COMPILED_SHARE
#define HLOCACHE_CORPUS_MIN_COMPILED_SHARE 0.95
#endif

uint64_t ShapeBytes(const hlo::Shape& s) {
  if (s.IsTuple()) {
    uint64_t total = 0;
    for (const hlo::Shape& e : s.tuple_elements) total += ShapeBytes(e);
    return total;
  }
  const auto width = static_cast<uint64_t>(hlo::BufferElementBytes(s.type));
  return static_cast<uint64_t>(s.ElementCount().value_or(0)) * width;
}

// The first leaf of `s` outside the core types (those both targets compute with), or empty.
std::string UnsupportedLeaf(const hlo::Shape& s) {
  if (s.IsTuple()) {
    for (const hlo::Shape& e : s.tuple_elements) {
      if (std::string why = UnsupportedLeaf(e); !why.empty()) return why;
    }
    return "";
  }
  if (s.is_buffer) return "buffer shapes";
  // The core types: those of 8 bits and more that both targets compute (the 8-, 6- and 4-bit
  // floats and the sub-byte integers are the CPU target's alone).
  const int bits = hlo::PrimitiveTypeBits(s.type);
  if (!interp::IsSupportedType(s.type) ||
      (s.type != hlo::PrimitiveType::kPred && s.type != hlo::PrimitiveType::kToken &&
       (bits < 8 || (hlo::IsFloat(s.type) && bits < 16)))) {
    return "element type " + std::string(hlo::PrimitiveTypeName(s.type));
  }
  if (!s.ElementCount()) return "dynamic dimensions";
  return "";
}

// Why no CPU compiler could build the module, or empty when one could: custom calls (code
// of another runtime), elided constants (values unknown), collectives of several participants.
std::string NotCompilable(const hlo::Module& m) {
  if (m.HasElidedConstants()) return "elided constants";
  for (const hlo::Computation& c : m.computations) {
    for (const hlo::Instruction& inst : c.instructions) {
      if (inst.opcode.opcode == hlo::Opcode::kCustomCall) return "custom-call";
    }
  }
  if (!hlo::WhyModuleNotSingleParticipant(m).empty()) return "collectives of several participants";
  return "";
}

// The share of compilable modules that must compile: the floor below which the test fails.
constexpr double kMinCompiledShare = HLOCACHE_CORPUS_MIN_COMPILED_SHARE;

// Why the module is outside the core op and type set (the ops of interp::IsCoreOp), or empty
// when it is inside: decided from the module alone (not from the code generator's verdict), so
// a lowering that wrongly refuses a core op fails the test instead of counting as an exception.
std::string OutsideCoreSet(const hlo::Module& m) {
  if (m.HasElidedConstants()) return "elided constants";
  std::vector<int32_t> pending{m.entry};
  std::vector<bool> seen(m.computations.size(), false);
  while (!pending.empty()) {
    const int32_t c = pending.back();
    pending.pop_back();
    if (c < 0 || seen[static_cast<size_t>(c)]) continue;
    seen[static_cast<size_t>(c)] = true;
    for (const hlo::Instruction& inst : m.computations[static_cast<size_t>(c)].instructions) {
      if (inst.opcode.phase != hlo::AsyncPhase::kNone || !interp::IsCoreOp(inst.opcode.opcode)) {
        return "op " + std::string(hlo::OpcodeName(inst.opcode.opcode));
      }
      if (!inst.has_shape()) return "instructions without shapes";
      if (std::string why = UnsupportedLeaf(inst.shape); !why.empty()) return why;
      for (int32_t callee : inst.callees) pending.push_back(callee);
    }
  }
  return "";
}

uint64_t Elements(const hlo::Shape& s) {
  if (!s.IsTuple()) return static_cast<uint64_t>(s.ElementCount().value_or(0));
  uint64_t n = 0;
  for (const hlo::Shape& e : s.tuple_elements) n += Elements(e);
  return n;
}

// Element operations the interpreter performs for computation `c`, roughly: one per result
// element, times the contraction for dots and the reducer's size for reductions.
uint64_t InterpreterWork(const hlo::Module& m, int32_t c, int depth = 0) {
  if (c < 0 || depth > 16) return 0;
  const hlo::Computation& comp = m.computations[static_cast<size_t>(c)];
  uint64_t work = 0;
  for (const hlo::Instruction& inst : comp.instructions) {
    const uint64_t out = std::max<uint64_t>(Elements(inst.shape), 1);
    const hlo::Opcode op = inst.opcode.opcode;
    if (op == hlo::Opcode::kDot && !inst.operands.empty()) {
      const hlo::Shape& lhs = comp.instructions[static_cast<size_t>(inst.operands[0])].shape;
      uint64_t contraction = 1;
      if (const hlo::Attribute* a = inst.FindAttribute("lhs_contracting_dims")) {
        if (auto dims = m.IntList(*a)) {
          for (int64_t d : *dims) {
            if (d >= 0 && static_cast<size_t>(d) < lhs.dims.size()) {
              contraction *=
                  static_cast<uint64_t>(std::max<int64_t>(lhs.dims[static_cast<size_t>(d)], 1));
            }
          }
        }
      }
      work += out * contraction;
    } else if (op == hlo::Opcode::kReduce && !inst.operands.empty()) {
      const uint64_t in = Elements(comp.instructions[static_cast<size_t>(inst.operands[0])].shape);
      work += in * (1 + InterpreterWork(m, inst.callees.empty() ? -1 : inst.callees[0], depth + 1));
    } else if (op == hlo::Opcode::kSort && !inst.operands.empty() && !inst.callees.empty()) {
      // n log n comparisons, made in lockstep over arrays: each costs the comparator's
      // instructions plus gathering its arguments, some 16 element operations in all
      // (measured: sort_full_1024x4096_bf16, 48 M comparisons of 13 instructions, 18 s).
      const hlo::Shape& keys = comp.instructions[static_cast<size_t>(inst.operands[0])].shape;
      const uint64_t n = Elements(keys);
      int64_t length = 1;
      if (const hlo::Attribute* a = inst.FindAttribute("dimensions")) {
        if (auto dims = m.IntList(*a); dims && dims->size() == 1 && (*dims)[0] >= 0 &&
                                       static_cast<size_t>((*dims)[0]) < keys.dims.size()) {
          length = keys.dims[static_cast<size_t>((*dims)[0])];
        }
      }
      uint64_t passes = 0;  // The merge sort's: ceil(log2(length)).
      while ((int64_t{1} << passes) < length) ++passes;
      work += n * std::max<uint64_t>(passes, 1) * 16 *
              std::max<uint64_t>(InterpreterWork(m, inst.callees[0], depth + 1), 1);
    } else if ((op == hlo::Opcode::kReduceWindow || op == hlo::Opcode::kSelectAndScatter) &&
               !inst.operands.empty()) {
      // Every placement's window, one step of the computation per element, in lockstep over
      // arrays (4 element operations a step for gathering and scattering).
      const hlo::Shape& base = comp.instructions[static_cast<size_t>(inst.operands[0])].shape;
      uint64_t window = 1;
      if (auto w = hlo::ReadWindow(m, inst, base.dims.size())) {
        for (const hlo::WindowDimension& d : *w) window *= static_cast<uint64_t>(d.size);
      }
      const uint64_t placements =
          op == hlo::Opcode::kReduceWindow
              ? out
              : Elements(comp.instructions[static_cast<size_t>(inst.operands[1])].shape);
      uint64_t step = 0;
      for (int32_t callee : inst.callees) step += InterpreterWork(m, callee, depth + 1);
      work += placements * window * 4 * std::max<uint64_t>(step, 1);
    } else if (op == hlo::Opcode::kConvolution && inst.operands.size() == 2) {
      // A multiply-add per output, window position and kernel input feature, at about twice
      // the cost of a dot's (index arithmetic per window position).
      const hlo::Shape& kernel = comp.instructions[static_cast<size_t>(inst.operands[1])].shape;
      if (auto d = hlo::ReadConvolutionDims(m, inst, kernel.dims.size())) {
        uint64_t taps =
            static_cast<uint64_t>(kernel.dims[static_cast<size_t>(d->kernel_input_feature)]);
        for (int64_t k : d->kernel_spatial)
          taps *= static_cast<uint64_t>(kernel.dims[static_cast<size_t>(k)]);
        work += out * std::max<uint64_t>(taps, 1) * 2;
      } else {
        work += out;
      }
    } else if (op == hlo::Opcode::kWhile) {
      // The trip count is not known here: one iteration, a lower bound.
      for (int32_t callee : inst.callees) work += InterpreterWork(m, callee, depth + 1);
    } else if (op == hlo::Opcode::kCall || op == hlo::Opcode::kFusion) {
      for (int32_t callee : inst.callees) work += InterpreterWork(m, callee, depth + 1);
    } else {
      work += out;
    }
  }
  return work;
}

struct Tally {
  std::mutex mu;
  int compilable = 0, lowered = 0, compiled = 0, matched = 0, not_run = 0, not_interpreted = 0;
  std::map<std::string, int> skipped;                           // Reason -> modules.
  std::vector<std::pair<std::string, std::string>> exceptions;  // Module, reason.
  std::vector<std::string> failures;
  std::vector<std::string> matched_files;
  std::vector<std::string> not_interpreted_files;
  std::vector<std::string> not_run_files;
};

TEST(CorpusCompileTest, EveryCoreOpModuleCompilesRunsAndMatchesTheInterpreter) {
  const std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  ASSERT_THAT(toolchain, IsOk());
  WorkerPoolOptions options;
  options.worker_binary = HLOCACHE_BINARY;
  options.workers = 2;
  options.max_queue = files.size();
  WorkerPool pool(options);

  // The modules the interpreter will take longest on go first, so that the two threads finish
  // together rather than one running the heaviest module alone at the end. InterpreterWork
  // counts a loop's body once; for this order a module with a loop counts as if its bodies ran
  // a thousand times.
  std::vector<std::pair<uint64_t, size_t>> by_work;
  for (size_t i = 0; i < files.size(); ++i) {
    auto module = hlo::ParseModuleFile(files[i]);
    uint64_t weight = 0;
    if (module) {
      weight = InterpreterWork(*module, module->entry);
      bool loops = false;
      for (const hlo::Computation& c : module->computations) {
        for (const hlo::Instruction& inst : c.instructions) {
          loops = loops || inst.opcode.opcode == hlo::Opcode::kWhile;
        }
      }
      if (loops) weight = std::min<uint64_t>(weight, uint64_t{1} << 50) * 1000;
    }
    by_work.emplace_back(weight, i);
  }
  std::stable_sort(by_work.begin(), by_work.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });

  Tally tally;
  std::atomic<size_t> next{0};
  std::atomic<size_t> lowered{0};
  std::atomic<size_t> lowered_only{0};
  auto work = [&] {
    for (size_t n; (n = next.fetch_add(1)) < files.size();) {
      const std::string& file = files[by_work[n].second];
      const std::string name = fs::path(file).filename().string();
      auto module = hlo::ParseModuleFile(file);
      if (!module) {
        std::lock_guard<std::mutex> lock(tally.mu);
        tally.failures.push_back(name + ": " + module.error().message());
        continue;
      }
      if (const std::string why = NotCompilable(*module); !why.empty()) {
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.skipped[why];
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.compilable;
      }
      // A module the code generator refuses is an exception: malformed (XLA's own tests include
      // modules whose shapes contradict their ops) or outside what it supports. Inside the core
      // op set only the first is allowed.
      auto source = LowerToCpp(*module);
      if (!source) {
        const StatusCode code = source.error().code();
        const bool in_core = OutsideCoreSet(*module).empty();
        std::lock_guard<std::mutex> lock(tally.mu);
        if (code == StatusCode::kInvalidArgument ||
            (code == StatusCode::kFailedPrecondition && !in_core)) {
          tally.exceptions.emplace_back(name, source.error().message());
        } else {
          tally.failures.push_back(name + ": " + source.error().message());
        }
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.lowered;
      }
      if (lowered.fetch_add(1) % kCompileStride != 0) {
        ++lowered_only;
        continue;
      }
      keying::KeySettings settings;
      settings.compiler_id = toolchain->CompilerId();
      auto keyed = keying::KeyModule(*module, settings);
      if (!keyed) {
        std::lock_guard<std::mutex> lock(tally.mu);
        tally.failures.push_back(name + ": " + keyed.error().message());
        continue;
      }
      const auto start = std::chrono::steady_clock::now();
      auto seconds = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      auto compiled = pool.Compile({keyed->key.text, std::string(module->source()), "", file});
      if (!compiled) {
        std::lock_guard<std::mutex> lock(tally.mu);
        tally.failures.push_back(name + ": " + compiled.error().message());
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.compiled;
      }
      auto abi = EntryLeavesOf(*module);
      uint64_t bytes = 0;
      for (const hlo::Shape& s : abi->parameters) bytes += ShapeBytes(s);
      for (const hlo::Shape& s : abi->results) bytes += ShapeBytes(s);
      if (bytes > kRunBufferLimit || InterpreterWork(*module, module->entry) > kRunWorkLimit) {
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.not_run;
        tally.not_run_files.push_back(name);
        continue;
      }
      std::string failure;
      auto loaded = LoadedExecutable::Load(compiled->artifact);
      auto args = interp::MakeArguments(*module, interp::ArgumentFill::kRandom, 42);
      if (!loaded) {
        failure = "load: " + loaded.error().message();
      } else if (!args) {
        failure = "arguments: " + args.error().message();
      } else {
        // Infeed, outfeed and host sends and recvs transfer with seeded recording hosts: the
        // same values in for both, the same values out from both.
        interp::RecordingHost host(42), interpreter_host(42);
        auto ran = Execute(**loaded, *abi, *args, &host);
        if (!ran) {
          failure = "run: " + ran.error().message();
        } else if (InterpreterWork(*module, module->entry) > kInterpreterBudget) {
          std::lock_guard<std::mutex> lock(tally.mu);
          ++tally.not_interpreted;
          tally.not_interpreted_files.push_back(name);
          continue;
        } else if (auto expected = interp::Evaluate(*module, *args, &interpreter_host); !expected) {
          failure = "interpreter: " + expected.error().message();
        } else {
          std::vector<const interp::Literal*> leaves;
          interp::FlattenLeaves(*expected, leaves);
          auto compared = interp::CompareWithInterpreter(leaves, *ran, *module);
          if (!compared) {
            failure = "compare: " + compared.error().message();
          } else if (compared->mismatched != 0) {
            failure = std::to_string(compared->mismatched) + " of " +
                      std::to_string(compared->elements) +
                      " elements differ; first: " + compared->first_mismatch;
          } else if (std::string sent = interp::CompareSent(interpreter_host, host);
                     !sent.empty()) {
            failure = "sent to the host: " + sent;
          }
        }
      }
      if (std::getenv("HLOCACHE_TEST_TRACE") != nullptr) {
        std::fprintf(stderr, "%s: compiled in %.1f s, ran and checked by %.1f s\n", name.c_str(),
                     compiled->seconds, seconds());
      }
      std::lock_guard<std::mutex> lock(tally.mu);
      if (failure.empty()) {
        ++tally.matched;
        tally.matched_files.push_back(name);
      } else {
        tally.failures.push_back(name + ": " + failure);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();

  int skipped = 0;
  for (const auto& [reason, n] : tally.skipped) skipped += n;
  std::printf(
      "corpus: %d of %d compilable modules (no custom-call, no elided constants, no "
      "collective of several participants) lower and compile: %.1f%%; %zu exceptions\n",
      tally.lowered, tally.compilable,
      tally.compilable ? 100.0 * tally.lowered / tally.compilable : 0.0, tally.exceptions.size());
  std::sort(tally.exceptions.begin(), tally.exceptions.end());
  for (const auto& [file, why] : tally.exceptions) {
    std::printf("  exception: %s: %s\n", file.c_str(), why.c_str());
  }
  if (kCompileStride > 1) {
    std::printf("corpus: %zu modules lowered; %zu of them lowered only (every %zu-th compiled)\n",
                lowered.load(), lowered_only.load(), kCompileStride);
  }
  std::printf(
      "corpus: %zu modules; %d compiled; %d ran and matched the interpreter; %d ran but are over "
      "the interpreter budget of %llu element operations; %d compiled but over the run bounds "
      "(%llu bytes of buffers, %llu element operations); %d skipped; %zu failed\n",
      files.size(), tally.compiled, tally.matched, tally.not_interpreted,
      static_cast<unsigned long long>(kInterpreterBudget), tally.not_run,
      static_cast<unsigned long long>(kRunBufferLimit),
      static_cast<unsigned long long>(kRunWorkLimit), skipped, tally.failures.size());
  for (const std::string& f : tally.not_run_files)
    std::printf("  compiled, not run: %s\n", f.c_str());
  std::vector<std::pair<int, std::string>> reasons;
  for (const auto& [reason, n] : tally.skipped) reasons.emplace_back(n, reason);
  std::sort(reasons.rbegin(), reasons.rend());
  for (const auto& [n, reason] : reasons) std::printf("  skipped %3d: %s\n", n, reason.c_str());
  std::sort(tally.not_interpreted_files.begin(), tally.not_interpreted_files.end());
  for (const std::string& f : tally.not_interpreted_files) {
    std::printf("  ran, over the interpreter budget (check with hlocache run --check): %s\n",
                f.c_str());
  }
  for (const std::string& f : tally.failures) ADD_FAILURE() << f;
  // At the plain build's budget all but the heaviest one in a hundred modules that run are also
  // checked (mobilenet_v2's training step, about 10^11 multiply-adds of convolutions, takes the
  // interpreter far longer than the suite may; `hlocache run --check` checks it).
  if (kInterpreterBudget >= (uint64_t{1} << 36)) {
    EXPECT_LE(tally.not_interpreted, std::max(1, tally.compiled / 100))
        << "modules ran but were not checked";
  }
  EXPECT_GE(tally.matched, static_cast<int>(100 / kCompileStride))
      << "far fewer core-op modules than the corpus holds";
  EXPECT_GE(tally.lowered, kMinCompiledShare * tally.compilable)
      << "fewer compilable modules compile than the floor of " << kMinCompiledShare;
  // PyTorch/XLA's BERT training graph compiles and runs, and matches the interpreter whenever
  // the budget covers it (it does at the default budget; the sanitizer build's is smaller).
  auto has = [](const std::vector<std::string>& v, const char* f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  constexpr const char* kBert = "bert__bert_single_graph_2.hlo";
  EXPECT_TRUE(kCompileStride > 1 || has(tally.matched_files, kBert) ||
              (kInterpreterBudget < (uint64_t{1} << 36) && has(tally.not_interpreted_files, kBert)))
      << "PyTorch/XLA's BERT training graph must compile, run and match";
  const WorkerPoolStats stats = pool.stats();
  EXPECT_EQ(stats.running, 0u);
  // Modules with equal keys (the corpus has a few duplicates) may share one compile.
  EXPECT_EQ(stats.compiles + stats.coalesced, static_cast<uint64_t>(tally.compiled));
}

// The GPU targets: every module of the core op set is lowered to CUDA and built by NVRTC for
// sm_80 and sm_90, each cubin's ELF header naming its architecture. The kernels of the smaller
// ones also run on the host emulation against the interpreter.
// The sanitizer build lowers them only: NVRTC and the host compiler of the emulation are not
// the code it instruments, and take it past the test's time limit.
#ifndef HLOCACHE_CORPUS_GPU_LOWER_ONLY
#define HLOCACHE_CORPUS_GPU_LOWER_ONLY 0
#endif
TEST(CorpusCompileTest, EveryCoreOpModuleBuildsCubinsForBothGpuTargets) {
  constexpr bool kLowerOnly = HLOCACHE_CORPUS_GPU_LOWER_ONLY;
  auto nvrtc = Nvrtc::Get();
  if (!nvrtc && !kLowerOnly) GTEST_SKIP() << nvrtc.error().message();
  constexpr uint64_t kEmulationBudget = uint64_t{1} << 22;  // Element operations.
  int eligible = 0, built = 0, emulated = 0;
  std::vector<std::string> malformed;
  double nvrtc_seconds = 0;
  size_t seen = 0;
  for (const std::string& file : test_support::CorpusFiles({"hlo", "torch_xla"})) {
    auto module = hlo::ParseModuleFile(file);
    if (!module || !NotCompilable(*module).empty() || !OutsideCoreSet(*module).empty()) continue;
    if (seen++ % kCompileStride != 0) continue;  // The sanitizer build takes every third.
    ++eligible;
    const std::string name = fs::path(file).filename().string();
    bool ok = true;
    for (const char* arch : {"sm_80", "sm_90"}) {
      auto program = LowerToCuda(*module, arch);
      if (!program && program.error().code() == StatusCode::kInvalidArgument) {
        // Shapes that contradict their ops: refused as the interpreter and the CPU target do.
        EXPECT_THAT(LowerToCpp(*module), StatusIs(StatusCode::kInvalidArgument)) << name;
        malformed.push_back(name + ": " + program.error().message());
        ok = false;
        break;
      }
      if (!program) {
        ADD_FAILURE() << name << ": " << program.error().message();
        ok = false;
        break;
      }
      if (kLowerOnly) continue;
      const auto start = std::chrono::steady_clock::now();
      auto cubin = (*nvrtc)->CompileToCubin(program->source, arch, name + ".cu");
      nvrtc_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!cubin) {
        ADD_FAILURE() << name << " (" << arch << "): " << cubin.error().message();
        ok = false;
        break;
      }
      auto built_for = CubinArch(*cubin);
      EXPECT_TRUE(built_for && *built_for == arch) << name << ": a cubin for another GPU";
      if (std::string(arch) != "sm_90" ||
          InterpreterWork(*module, module->entry) > kEmulationBudget) {
        continue;
      }
      auto args = interp::MakeArguments(*module, interp::ArgumentFill::kRandom, 1);
      auto leaves = EntryLeavesOf(*module);
      if (!args || !leaves) continue;  // Too large to make inputs for.
      auto in = ArgumentBytes(*leaves, *args);
      auto expected = interp::Evaluate(*module, *args);
      ASSERT_TRUE(in && expected) << name;
      auto got = EmulateCudaProgram(*program, *in, leaves->results);
      ASSERT_TRUE(got.has_value()) << name << ": " << got.error().message();
      std::vector<const interp::Literal*> want;
      interp::FlattenLeaves(*expected, want);
      auto compared = interp::CompareWithInterpreter(want, *got, *module);
      ASSERT_TRUE(compared.has_value()) << name;
      EXPECT_EQ(compared->mismatched, 0u) << name << ": " << compared->first_mismatch;
      ++emulated;
    }
    if (ok) ++built;
  }
  std::printf(
      "gpu: %d of %d core-op corpus modules %s for sm_80 and sm_90 (NVRTC %s, %.1f s "
      "in all); %d of them ran on the host emulation and matched the interpreter\n",
      built, eligible, kLowerOnly ? "lowered" : "built",
      nvrtc ? (*nvrtc)->version().c_str() : "not used", nvrtc_seconds, emulated);
  for (const std::string& m : malformed) std::printf("  exception: malformed: %s\n", m.c_str());
  EXPECT_EQ(built + static_cast<int>(malformed.size()), eligible);
  EXPECT_GE(eligible, static_cast<int>(100 / kCompileStride))
      << "far fewer core-op modules than the corpus holds";
}

}  // namespace
}  // namespace hlocache::compiler
