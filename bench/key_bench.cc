// Key throughput on the largest corpus modules: parse only, parse + canonicalize + key (warm: in
// one process, the text in memory), a fresh `hlocache key FILE` process per run (cold: what a
// CI job or a process starting pays, start-up and reading the file included) with its peak
// memory (which a fresh process pays the kernel to zero), and raw XXH3-128 over the same bytes
// (the floor any key costs), side by side. Warm keys are timed on
// one thread (parse, then canonicalize) and as `hlocache key` computes them (KeyText: the
// canonical form built on a second thread as the parser goes, which then frees the module's
// instructions while the first prints the text).
//
// Usage: key_bench [CORPUS_DIR] [MIN_SECONDS_PER_CELL]

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/fast_hash.h"
#include "compiler/hlo/parser.h"
#include "keying/keying.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable"
#endif
#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "../shared/corpus"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Runs `fn` until `min_seconds` have passed (at least 3 times); returns the best MB/s. `prepare`
// runs untimed before each run: it makes the copy of the text that the parser takes ownership
// of, as a caller that read the module would hand over its buffer.
template <typename Prepare, typename Fn>
double BestMBps(size_t bytes, double min_seconds, Prepare prepare, Fn fn) {
  double best = 0;
  auto start = Clock::now();
  int runs = 0;
  while (runs < 3 || std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
    prepare();
    auto t0 = Clock::now();
    fn();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / 1e6 / s);
    ++runs;
  }
  return best;
}

struct ColdRuns {
  double best_mbps = 0;        // In MB/s of the file; 0 when a run failed.
  double median_peak_mb = -1;  // The processes' peak resident memory; -1 when not known.
};

// `runs` fresh `hlocache key FILE` processes: the best rate, and the median of their peak
// memory, which is what a fresh process pays the kernel to zero (bench/README.md, Keys). A
// child's ru_maxrss is at least its parent's peak (exec keeps the larger of the memory it
// replaces, which posix_spawn shares with this process, and the new program's), so these run
// before this process holds much, and a peak not above this process's own is not reported.
ColdRuns Cold(const fs::path& file, size_t bytes, int runs) {
  ColdRuns out;
  std::vector<double> peaks;
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  for (int r = 0; r < runs; ++r) {
    // The warm column's settings.
    std::string binary = HLOCACHE_BINARY, command = "key", target = "--target=cpu-x86-64-v3",
                elided = "--allow-elided-constants", path = file.string();
    char* argv[] = {binary.data(), command.data(), target.data(),
                    elided.data(), path.data(),    nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    const auto t0 = Clock::now();
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    rusage usage{};
    if (spawned != 0 || wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      return ColdRuns{};
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    out.best_mbps = std::max(out.best_mbps, static_cast<double>(bytes) / 1e6 / s);
    if (usage.ru_maxrss > self.ru_maxrss) {
      peaks.push_back(static_cast<double>(usage.ru_maxrss) / 1024.0);  // KiB on Linux.
    }
  }
  if (peaks.size() == static_cast<size_t>(runs)) {
    std::sort(peaks.begin(), peaks.end());
    out.median_peak_mb = peaks[peaks.size() / 2];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus = argc > 1 ? argv[1] : HLOCACHE_CORPUS_DIR;
  double min_seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  std::vector<std::pair<uintmax_t, fs::path>> files;
  for (const char* sub : {"hlo", "torch_xla"}) {
    fs::path dir = fs::path(corpus) / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".hlo") files.emplace_back(fs::file_size(e.path()), e.path());
    }
  }
  if (files.size() < 3) {
    std::fprintf(stderr, "key_bench: corpus not found at %s\n", corpus.c_str());
    return 1;
  }
  std::sort(files.rbegin(), files.rend());
  files.resize(3);
  // First, while this process is small (see Cold).
  std::vector<ColdRuns> cold_runs;
  for (const auto& [size, path] : files) cold_runs.push_back(Cold(path, size, 5));

  std::printf(
      "| module | MB | parse MB/s | canonical key MB/s, warm, one thread | warm, two threads | "
      "`hlocache key` MB/s, cold | its peak memory, MB | raw XXH3-128 MB/s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t f = 0; f < files.size(); ++f) {
    const fs::path& path = files[f].second;
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    hlocache::keying::KeySettings settings;
    settings.target = "cpu-x86-64-v3";
    settings.allow_elided_constants = true;
    bool ok = true;
    std::string input;
    auto copy_input = [&] { input = text; };
    double parse = BestMBps(text.size(), min_seconds, copy_input, [&] {
      auto m = hlocache::hlo::ParseModule(std::move(input), path.string());
      ok &= m.has_value();
    });
    double key = BestMBps(text.size(), min_seconds, copy_input, [&] {
      auto m = hlocache::hlo::ParseModule(std::move(input), path.string());
      ok &= m.has_value();
      if (m) ok &= hlocache::keying::KeyModule(*m, settings).has_value();
    });
    // What `hlocache key` and the client's key() run: the canonical form built beside the
    // parser, and the module freed beside the printing of its text.
    double pipelined = BestMBps(text.size(), min_seconds, copy_input, [&] {
      ok &= hlocache::keying::KeyText(std::move(input), path.string(), settings).has_value();
    });
    volatile uint64_t sink = 0;
    double raw = BestMBps(
        text.size(), min_seconds, [] {},
        [&] { sink = sink + XXH3_128bits(text.data(), text.size()).low64; });
    const ColdRuns& cold = cold_runs[f];
    if (!ok || cold.best_mbps == 0) {
      std::fprintf(stderr, "key_bench: %s failed to key\n", path.c_str());
      return 1;
    }
    std::string name = path.filename().string();
    if (name.size() > 60) name = name.substr(name.size() - 60);
    const std::string peak =
        cold.median_peak_mb < 0 ? "-" : std::to_string(std::lround(cold.median_peak_mb));
    std::printf("| %s | %.2f | %.0f | %.0f | %.0f | %.0f | %s | %.0f |\n", name.c_str(),
                text.size() / 1e6, parse, key, pipelined, cold.best_mbps, peak.c_str(), raw);
  }
  return 0;
}
