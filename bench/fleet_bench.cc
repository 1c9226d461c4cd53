// fleet_bench: a job of 8 processes that each need the same 12 corpus graphs at start-up (like
// SPMD workers), in three modes in one run:
//   no cache      every process compiles every graph itself;
//   shared, cold  the processes share one `hlocache serve` with an empty store;
//   shared, warm  the same server again, now holding all 12.
// Prints wall time, compiles on the server and per process, and the speed-up over no cache.
//
// Usage: fleet_bench [processes, default 8] [graphs, default 12]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/cache.h"
#include "common/file.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "tests/integration/server_harness.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable"
#endif
#ifndef HLOCACHE_CORPUS_DIR
#error "HLOCACHE_CORPUS_DIR names the corpus"
#endif

namespace fs = std::filesystem;

namespace {

// Corpus modules the code generator supports, from the middle of the size range (real
// compile times, neither trivial nor the largest).
std::vector<std::string> PickGraphs(size_t count) {
  std::vector<std::pair<uintmax_t, std::string>> candidates;
  for (const char* sub : {"hlo", "torch_xla"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(HLOCACHE_CORPUS_DIR) / sub, ec)) {
      if (e.path().extension() != ".hlo") continue;
      auto module = hlocache::hlo::ParseModuleFile(e.path().string());
      if (!module || module->HasElidedConstants()) continue;
      if (!hlocache::compiler::LowerToCpp(*module)) continue;
      candidates.emplace_back(e.file_size(), e.path().string());
    }
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> out;
  const size_t start = candidates.size() > count ? (candidates.size() - count) / 2 : 0;
  for (size_t i = start; i < candidates.size() && out.size() < count; ++i) {
    out.push_back(candidates[i].second);
  }
  return out;
}

// One worker process: gets every graph through the cache named by `spec`, in order.
int Child(const std::string& spec, const std::vector<std::string>& graphs) {
  hlocache::client::CacheOptions options;
  options.worker_binary = HLOCACHE_BINARY;
  options.log = [](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  };
  auto cache = hlocache::client::Cache::Open(spec, options);
  if (!cache) return 1;
  int here = 0, by_server = 0, hits = 0;
  for (const std::string& file : graphs) {
    auto text = hlocache::ReadWholeFile(file);
    if (!text) return 1;
    auto exe = (*cache)->GetOrCompile(*text);
    if (!exe) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), exe.error().message().c_str());
      return 1;
    }
    using hlocache::client::Source;
    if (exe->source == Source::kCompiledHere)
      ++here;
    else if (exe->source == Source::kCompiledByServer)
      ++by_server;
    else
      ++hits;
  }
  (*cache)->Flush();
  std::printf(
      "%s\n",
      nlohmann::json({{"here", here}, {"server", by_server}, {"hits", hits}}).dump().c_str());
  return 0;
}

struct Outcome {
  double seconds = 0;
  int here = 0, by_server = 0, hits = 0, failed = 0;
};

Outcome RunFleet(const std::string& self, const std::string& spec, int processes,
                 const std::vector<std::string>& graphs, const fs::path& root,
                 const std::string& mode) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<pid_t, fs::path>> children;
  for (int p = 0; p < processes; ++p) {
    const fs::path out = root / (mode + "-child" + std::to_string(p) + ".json");
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<std::string> args = {self, "--child", spec};
      args.insert(args.end(), graphs.begin(), graphs.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::FILE* f = std::fopen(out.c_str(), "w");
      std::FILE* notes = std::fopen((out.string() + ".log").c_str(), "w");
      ::dup2(fileno(f), 1);
      ::dup2(fileno(notes), 2);
      ::execv(self.c_str(), argv.data());
      ::_exit(127);
    }
    children.emplace_back(pid, out);
  }
  Outcome o;
  for (auto& [pid, out] : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto text = hlocache::ReadWholeFile(out);
    auto j = nlohmann::json::parse(text ? *text : "", nullptr, false);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || j.is_discarded()) {
      ++o.failed;
      continue;
    }
    o.here += j["here"].get<int>();
    o.by_server += j["server"].get<int>();
    o.hits += j["hits"].get<int>();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--child") {
    return Child(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  const int processes = argc > 1 ? std::atoi(argv[1]) : 8;
  const size_t count = argc > 2 ? static_cast<size_t>(std::atoi(argv[2])) : 12;
  const std::string self = hlocache::CurrentExecutable().string();
  const std::vector<std::string> graphs = PickGraphs(count);
  if (graphs.size() < count) {
    std::fprintf(stderr, "only %zu compilable graphs in %s\n", graphs.size(), HLOCACHE_CORPUS_DIR);
    return 1;
  }
  const fs::path root =
      fs::temp_directory_path() / ("hlocache-fleet-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::printf("fleet_bench: %d processes, each needing the same %zu corpus graphs:\n", processes,
              count);
  for (const auto& g : graphs) std::printf("  %s\n", fs::path(g).filename().c_str());

  const Outcome none = RunFleet(self, "", processes, graphs, root, "none");
  hlocache::testing::ServerProcess server(HLOCACHE_BINARY, root / "store", {"--access-log", ""});
  if (!server.started()) {
    std::fprintf(stderr, "the server did not start:\n%s\n", server.output().c_str());
    return 1;
  }
  auto server_compiles = [&] {
    auto r = server.Client()->Get("/v1/stats");
    return r ? nlohmann::json::parse(r->body)["compiles"].get<int>() : -1;
  };
  const Outcome cold = RunFleet(self, server.url(), processes, graphs, root, "cold");
  const int cold_compiles = server_compiles();
  const Outcome warm = RunFleet(self, server.url(), processes, graphs, root, "warm");
  const int warm_compiles = server_compiles() - cold_compiles;
  server.Stop();
  // What the processes noted (tiers skipped, artifacts dropped): the reasons behind any compile
  // a process had to do itself in a shared mode.
  for (int p = 0; p < processes; ++p) {
    auto notes = hlocache::ReadWholeFile(root / ("cold-child" + std::to_string(p) + ".json.log"));
    if (notes && !notes->empty()) std::printf("process %d noted: %s", p, notes->c_str());
  }
  fs::remove_all(root);

  std::printf(
      "\n| mode | wall s | compiles on the server | compiles in the processes | hits | vs no cache "
      "|\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  auto row = [&](const char* mode, const Outcome& o, int on_server) {
    std::printf("| %s | %.2f | %d | %d | %d | %.1fx |\n", mode, o.seconds, on_server, o.here,
                o.hits, none.seconds / o.seconds);
  };
  row("no cache", none, 0);
  row("shared, cold", cold, cold_compiles);
  row("shared, warm", warm, warm_compiles);
  const bool ok = none.failed + cold.failed + warm.failed == 0;
  std::printf(
      "\ncold: %d compiles for %zu graphs (target: exactly %zu); warm: %.1fx faster than "
      "no cache (target: at least 20x)%s\n",
      cold_compiles + cold.here, count, count, none.seconds / warm.seconds,
      ok ? "" : "; SOME PROCESSES FAILED");
  return ok ? 0 : 1;
}
