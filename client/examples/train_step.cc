// An example training process: one line to share compiled executables with the fleet
// (hlocache_initialize_cache), then a few "steps" of one graph, printing where its executable
// came from. Uses only the C API of libhlocache.so (client/hlocache_c.h).
//
//   train_step SPEC FILE.hlo [STEPS]      e.g. train_step http://127.0.0.1:7070 graph.hlo 3
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/hlocache_c.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SPEC FILE.hlo [STEPS]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  char error[1024];
  if (hlocache_initialize_cache(argv[1], 0, error, sizeof error) != 0) {
    std::fprintf(stderr, "hlocache: %s\n", error);
    return 1;
  }
  const std::string hlo = text.str();
  const auto start = std::chrono::steady_clock::now();
  hlocache_executable* exe = hlocache_compile(hlo.data(), hlo.size(), nullptr, error, sizeof error);
  if (exe == nullptr) {
    std::fprintf(stderr, "hlocache: %s\n", error);
    return 1;
  }
  const double ready =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("executable %s: %s, ready in %.3f s\n", hlocache_executable_key(exe),
              hlocache_executable_source(exe), ready);

  // Parameters filled with a small pattern; results written each step.
  std::vector<std::vector<unsigned char>> params, results;
  std::vector<const void*> param_ptrs;
  std::vector<void*> result_ptrs;
  for (size_t i = 0; i < hlocache_executable_parameter_count(exe); ++i) {
    params.emplace_back(hlocache_executable_parameter_bytes(exe, i));
    for (size_t b = 0; b < params.back().size(); ++b) params.back()[b] = (b % 7 == 0) ? 0x3c : 0;
  }
  for (size_t k = 0; k < hlocache_executable_result_count(exe); ++k) {
    results.emplace_back(hlocache_executable_result_bytes(exe, k));
  }
  for (auto& p : params) param_ptrs.push_back(p.data());
  for (auto& r : results) result_ptrs.push_back(r.data());
  for (int step = 0; step < steps; ++step) {
    const auto t = std::chrono::steady_clock::now();
    if (hlocache_executable_run(exe, param_ptrs.data(), result_ptrs.data(), error, sizeof error) !=
        0) {
      std::fprintf(stderr, "step %d: %s\n", step, error);
      hlocache_executable_free(exe);
      return 1;
    }
    std::printf(
        "step %d: %.3f ms\n", step,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  hlocache_executable_free(exe);
  return 0;
}
