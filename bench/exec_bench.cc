// exec_bench: how fast hlocache's executables run, beside the libraries users would otherwise
// run: the programs of bench/exec_programs/ (elementwise math, softmax, a row reduction, layer
// norms, convolutions, a dot, a gather, a scatter-add, a sort, an MLP training step and a while
// with loop-invariant work), compiled by hlocache and run on generated inputs, then the same
// programs in numpy and PyTorch (bench/exec_peers.py, Debian's python3-numpy and python3-torch)
// on the same inputs, with one thread and with every core. Prints one table per thread count:
// each system's median time, the best peer, hlocache's time against it, and the largest
// difference between hlocache's result and PyTorch's.
//
// Usage: exec_bench [PROGRAM...] (default: every program). Needs /usr/bin/python3 with numpy
// and torch for the peer columns (`make bench` installs them); without them it prints
// hlocache's times alone.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/huge_pages.h"
#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/hlo/parser.h"
#include "compiler/semantics/entry_leaves.h"
#include "compiler/toolchain.h"
#include "keying/keying.h"

#ifndef HLOCACHE_EXEC_PROGRAMS
#error "HLOCACHE_EXEC_PROGRAMS names bench/exec_programs"
#endif
#ifndef HLOCACHE_EXEC_PEERS
#error "HLOCACHE_EXEC_PEERS names bench/exec_peers.py"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace hlocache;

const char* const kPrograms[] = {"elementwise",     "softmax",     "reduce_rows", "layer_norm",
                                 "layer_norm_bf16", "conv_nhwc",   "conv_nchw",   "dot",
                                 "gather",          "scatter_add", "sort_rows",   "mlp_step",
                                 "while_invariant"};

// Deterministic inputs: floats uniform in [-1, 1); s32 parameters are indices, uniform in
// [0, the first parameter's first dimension) (the table a gather or scatter indexes).
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string DtypeOf(hlo::PrimitiveType t) {
  switch (t) {
    case hlo::PrimitiveType::kF32:
      return "f32";
    case hlo::PrimitiveType::kBF16:
      return "bf16";
    case hlo::PrimitiveType::kS32:
      return "s32";
    default:
      return "";
  }
}

// An array's memory as numpy allocates it, and so the peers' inputs (numpy arrays, and tensors
// sharing them): 64-byte aligned, huge pages advised from 4 MiB on before the first touch (numpy
// does so by default on Linux). The executables read and write the same kind of memory.
class Buffer {
 public:
  explicit Buffer(size_t bytes)
      : size_(bytes), data_(static_cast<char*>(std::aligned_alloc(64, (bytes + 64) / 64 * 64))) {
    if (data_ == nullptr) {
      std::fprintf(stderr, "exec_bench: out of memory for a buffer of %zu bytes\n", bytes);
      std::exit(1);
    }
    if (bytes >= (size_t{4} << 20)) AdviseHugePages(data_.get(), bytes);
    std::memset(data_.get(), 0, bytes);
  }
  char* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  size_t size_;
  std::unique_ptr<char, Free> data_;
};

Buffer MakeInput(const hlo::Shape& shape, int64_t index_bound, uint64_t seed) {
  const int64_t n = shape.BoundElementCount().value_or(0);
  uint64_t state = seed;
  Buffer bytes(static_cast<size_t>(n) * hlo::BufferElementBytes(shape.type));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix(state);
    const float f = static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    if (shape.type == hlo::PrimitiveType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else if (shape.type == hlo::PrimitiveType::kBF16) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const uint16_t b = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else if (shape.type == hlo::PrimitiveType::kS32) {
      const int32_t v =
          static_cast<int32_t>(r % static_cast<uint64_t>(std::max<int64_t>(1, index_bound)));
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
  return bytes;
}

nlohmann::json ShapeJson(const hlo::Shape& s, const std::string& file) {
  return {{"file", file}, {"dtype", DtypeOf(s.type)}, {"shape", s.dims}};
}

struct Ours {
  std::string name;
  double compile_s = 0;
  double first_ms = 0;    // The first run: first-touch pages, and values hoisted out of loops.
  double run_ms_one = 0;  // HLOCACHE_THREADS=1.
  double run_ms_all = 0;  // Every core.
  std::string error;
};

// Runs the entry point on raw buffers: the median of repeated runs after a warm-up.
double MedianMs(const compiler::LoadedExecutable& exe, const std::vector<Buffer>& inputs,
                const std::vector<Buffer>& outputs, double& first_ms) {
  std::vector<const void*> params;
  for (const Buffer& b : inputs) params.push_back(b.data());
  std::vector<void*> results;
  for (const Buffer& b : outputs) results.push_back(b.data());
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(exe.entry());
  const auto first = Clock::now();
  entry(params.data(), results.data());  // Warm-up: first-touch pages.
  first_ms = std::chrono::duration<double, std::milli>(Clock::now() - first).count();
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 ||
         (times.size() < 15 && std::chrono::duration<double>(Clock::now() - start).count() < 0.5)) {
    const auto t0 = Clock::now();
    entry(params.data(), results.data());
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::map<std::string, nlohmann::json> RunPeers(const fs::path& dir, int threads) {
  std::map<std::string, nlohmann::json> out;
  const std::string command = "/usr/bin/python3 " + std::string(HLOCACHE_EXEC_PEERS) + " " +
                              dir.string() + " " + std::to_string(threads) + " 2>" +
                              (dir / "peers.err").string();
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("name")) out[j["name"].get<std::string>()] = j;
  }
  if (::pclose(pipe) != 0 || out.empty()) {
    auto err = ReadWholeFile(dir / "peers.err");
    std::printf("\n(the peers did not run: %s)\n",
                err && !err->empty() ? err->substr(0, 300).c_str() : "no output");
  }
  return out;
}

void PrintTable(const std::vector<Ours>& ours, const std::map<std::string, nlohmann::json>& peers,
                int threads) {
  std::printf(
      "\n%d thread%s, for the peers and hlocache's executables alike:\n\n"
      "| program | hlocache ms | hlocache first run ms | numpy ms | PyTorch ms | best peer | vs "
      "best "
      "peer | max |diff| vs PyTorch (max |value|) |\n|---|---:|---:|---:|---:|---|---:|---:|\n",
      threads, threads == 1 ? "" : "s");
  double log_sum = 0;
  int counted = 0;
  double log_sum_kernels = 0;
  int counted_kernels = 0;
  double worst = 0;
  for (const Ours& o : ours) {
    if (!o.error.empty()) {
      std::printf("| %s | (%s) |\n", o.name.c_str(), o.error.c_str());
      continue;
    }
    auto it = peers.find(o.name);
    auto ms = [&](const char* field) {
      return it != peers.end() && it->second.contains(field) && it->second[field].is_number()
                 ? it->second[field].get<double>()
                 : -1.0;
    };
    const double np_ms = ms("numpy_ms"), torch_ms = ms("torch_ms");
    const double run_ms = threads == 1 ? o.run_ms_one : o.run_ms_all;
    double best = -1;
    const char* best_name = "-";
    if (np_ms > 0) best = np_ms, best_name = "numpy";
    if (torch_ms > 0 && (best < 0 || torch_ms < best)) best = torch_ms, best_name = "PyTorch";
    auto cell = [](double v) {
      char buf[32];
      if (v < 0) return std::string("n/a");
      std::snprintf(buf, sizeof buf, v < 0.1 ? "%.3g" : "%.2f", v);
      return std::string(buf);
    };
    std::string ratio = "n/a";
    if (best > 0) {
      const double r = run_ms / best;
      char buf[32];
      std::snprintf(buf, sizeof buf, r < 0.01 ? "%.2gx" : "%.2fx", r);
      ratio = buf;
      log_sum += std::log(r);
      ++counted;
      worst = std::max(worst, r);
      // The loop-invariant while is thousands of times faster than the peers (they recompute
      // the invariant sum every step); a mean without it says how the kernels compare.
      if (o.name != "while_invariant") {
        log_sum_kernels += std::log(r);
        ++counted_kernels;
      }
    }
    std::string diff = "n/a";
    if (ms("max_abs_diff") >= 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2g (%.3g)", ms("max_abs_diff"), ms("max_abs"));
      diff = buf;
    }
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", o.name.c_str(), cell(run_ms).c_str(),
                cell(o.first_ms).c_str(), cell(np_ms).c_str(), cell(torch_ms).c_str(), best_name,
                ratio.c_str(), diff.c_str());
  }
  if (counted > 0) {
    std::printf(
        "\ngeometric mean vs the best peer: %.2fx (target: at most 1.0x); slowest: %.2fx "
        "(target: at most 1.5x)\n",
        std::exp(log_sum / counted), worst);
    if (counted_kernels > 0 && counted_kernels < counted) {
      std::printf("geometric mean without the loop-invariant while: %.2fx\n",
                  std::exp(log_sum_kernels / counted_kernels));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names(argv + 1, argv + argc);
  if (names.empty()) names.assign(std::begin(kPrograms), std::end(kPrograms));
  std::string known;
  for (const char* p : kPrograms) known += std::string(known.empty() ? "" : ", ") + p;
  for (const std::string& name : names) {
    if (name == "--help" || name == "-h") {
      std::printf("usage: exec_bench [PROGRAM...] (default: all of %s)\n", known.c_str());
      return 0;
    }
    if (std::find(std::begin(kPrograms), std::end(kPrograms), name) == std::end(kPrograms)) {
      std::fprintf(stderr, "exec_bench: no program '%s' (programs: %s)\n", name.c_str(),
                   known.c_str());
      return 1;
    }
  }
  auto toolchain = compiler::Toolchain::Probe({});
  if (!toolchain) {
    std::fprintf(stderr, "exec_bench: %s\n", toolchain.error().message().c_str());
    return 1;
  }
  const fs::path dir = fs::temp_directory_path() / ("hlocache-exec-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf("exec_bench: %zu programs, compiled by %s\n", names.size(),
              toolchain->CompilerId().c_str());
  nlohmann::json manifest = nlohmann::json::array();
  std::vector<Ours> ours;
  for (const std::string& name : names) {
    Ours o;
    o.name = name;
    const fs::path file = fs::path(HLOCACHE_EXEC_PROGRAMS) / (name + ".hlo");
    auto module = hlo::ParseModuleFile(file.string());
    auto leaves = module ? compiler::EntryLeavesOf(*module)
                         : Result<compiler::EntryLeaves>(Error(module.error()));
    if (!leaves) {
      o.error = leaves.error().message();
      ours.push_back(o);
      continue;
    }
    keying::KeySettings settings;
    settings.compiler_id = toolchain->CompilerId();
    auto keyed = keying::KeyModule(*module, settings);
    const auto t0 = Clock::now();
    auto artifact = keyed ? compiler::BuildArtifact(*module, *toolchain, {keyed->key.text, ""})
                          : Result<std::string>(Error(keyed.error()));
    o.compile_s = std::chrono::duration<double>(Clock::now() - t0).count();
    auto exe = artifact
                   ? compiler::LoadedExecutable::Load(*artifact)
                   : Result<std::unique_ptr<compiler::LoadedExecutable>>(Error(artifact.error()));
    if (!exe) {
      o.error = exe.error().message();
      ours.push_back(o);
      continue;
    }
    nlohmann::json entry = {{"name", name}, {"params", nlohmann::json::array()}};
    std::vector<Buffer> inputs;
    const int64_t index_bound = leaves->parameters.empty() || leaves->parameters[0].dims.empty()
                                    ? 1
                                    : leaves->parameters[0].dims[0];
    for (size_t i = 0; i < leaves->parameters.size(); ++i) {
      const hlo::Shape& s = leaves->parameters[i];
      inputs.push_back(MakeInput(s, index_bound, 1000 * (i + 1) + name.size()));
      const std::string in_file = name + ".in" + std::to_string(i) + ".bin";
      std::ofstream(dir / in_file, std::ios::binary)
          .write(inputs.back().data(), static_cast<std::streamsize>(inputs.back().size()));
      entry["params"].push_back(ShapeJson(s, in_file));
    }
    std::vector<Buffer> outputs;
    for (const hlo::Shape& s : leaves->results) {
      outputs.emplace_back(
          static_cast<size_t>(s.BoundElementCount().value_or(0) * hlo::BufferElementBytes(s.type)));
    }
    // Every core first: an executable's thread pool takes its size from its first split loop.
    ::unsetenv("HLOCACHE_THREADS");
    o.run_ms_all = MedianMs(**exe, inputs, outputs, o.first_ms);
    ::setenv("HLOCACHE_THREADS", "1", 1);
    double first_one = 0;
    o.run_ms_one = MedianMs(**exe, inputs, outputs, first_one);
    ::unsetenv("HLOCACHE_THREADS");
    const std::string out_file = name + ".out.bin";
    std::ofstream(dir / out_file, std::ios::binary)
        .write(outputs[0].data(), static_cast<std::streamsize>(outputs[0].size()));
    entry["result"] = ShapeJson(leaves->results[0], out_file);
    manifest.push_back(entry);
    std::printf("  %-16s compiled in %.1f s, runs in %.2f ms (one thread), %.2f ms (every core)\n",
                name.c_str(), o.compile_s, o.run_ms_one, o.run_ms_all);
    std::fflush(stdout);
    ours.push_back(o);
  }
  std::ofstream(dir / "manifest.json") << manifest.dump(1);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  PrintTable(ours, RunPeers(dir, 1), 1);
  if (cores > 1) PrintTable(ours, RunPeers(dir, cores), cores);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
