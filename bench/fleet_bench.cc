// fleet_bench: a job of 8 processes that each need the same 12 corpus graphs at start-up (like
// SPMD workers), in three modes in one run:
//   no cache      every process compiles every graph itself;
//   shared, cold  the processes share one `hlocache serve` with an empty store;
//   shared, warm  the same server again, now holding all 12.
// Prints wall time, compiles on the server and per process, and the speed-up over no cache.
//
// Then, where network namespaces can be made (root), the same processes on two worker hosts
// (namespaces joined by a bridge), half on each, behind per-host `serve --upstream` caches in
// front of one origin in a third namespace:
//   hosts, cold         every store empty;
//   hosts, warm         the same processes again;
//   new hosts           two fresh per-host caches (empty) in front of the warm origin.
// Prints compiles on the origin and on each host.
//
// Then, where Ceph is installed (`make test` installs it), the same processes with no server at
// all: each with a directory of its own (its host's disk) in front of one bucket on a Ceph
// cluster started for the run (tests/integration/ceph_cluster.sh):
//   bucket, cold        every directory and the bucket empty;
//   bucket, warm        the same directories again;
//   bucket, new hosts   fresh directories in front of the warm bucket;
//   bucket alone        the processes again with the bucket as their only tier.
// then two origins in front of a second bucket and two hosts' caches in front of both
// (serve --upstream O1,O2,BUCKET), the processes alternating hosts: cold, warm, and new hosts
// (empty caches); and a hit's latency from a directory, from an origin and from the bucket.
//
// Usage: fleet_bench [processes, default 8] [graphs, default 12]
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
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
#ifndef HLOCACHE_CEPH_SCRIPT
#error "HLOCACHE_CEPH_SCRIPT names tests/integration/ceph_cluster.sh"
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

// Runs `processes` children at once; process p runs under `launcher(p)` (empty: directly), with
// "%p" in `spec` replaced by p, or with the spec `spec_of(p)` when given.
Outcome RunFleet(const std::string& self, const std::string& spec, int processes,
                 const std::vector<std::string>& graphs, const fs::path& root,
                 const std::string& mode,
                 const std::function<std::vector<std::string>(int)>& launcher = {},
                 const std::function<std::string(int)>& spec_of = {}) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<pid_t, fs::path>> children;
  for (int p = 0; p < processes; ++p) {
    const fs::path out = root / (mode + "-child" + std::to_string(p) + ".json");
    std::vector<std::string> args = launcher ? launcher(p) : std::vector<std::string>();
    std::string child_spec = spec_of ? spec_of(p) : spec;
    if (const size_t at = child_spec.find("%p"); at != std::string::npos) {
      child_spec.replace(at, 2, std::to_string(p));
    }
    args.insert(args.end(), {self, "--child", child_spec});
    args.insert(args.end(), graphs.begin(), graphs.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::FILE* f = std::fopen(out.c_str(), "w");
      std::FILE* notes = std::fopen((out.string() + ".log").c_str(), "w");
      ::dup2(fileno(f), 1);
      ::dup2(fileno(notes), 2);
      ::execvp(argv[0], argv.data());
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

// Network namespaces for the multi-host mode: an origin and two worker hosts on a bridge in a
// fourth namespace, set up with iproute2 and removed on destruction.
class Hosts {
 public:
  static constexpr const char* kOriginAddress = "10.97.0.1";
  explicit Hosts(std::string prefix) : prefix_(std::move(prefix)) {}
  ~Hosts() {
    for (const std::string& ns : made_) Sh("ip netns del " + ns);
  }
  std::string Ns(const std::string& host) const { return prefix_ + host; }
  std::vector<std::string> Launcher(const std::string& host) const {
    return {"ip", "netns", "exec", Ns(host)};
  }

  bool Build() {
    const std::string sw = Ns("sw");
    for (const std::string host : {"sw", "origin", "a", "b"}) {
      if (!Sh("ip netns add " + Ns(host))) return false;
      made_.push_back(Ns(host));
      if (!Sh("ip -n " + Ns(host) + " link set lo up")) return false;
    }
    if (!Sh("ip -n " + sw + " link add br0 type bridge") ||
        !Sh("ip -n " + sw + " link set br0 up")) {
      return false;
    }
    int n = 0;
    for (const std::string host : {"origin", "a", "b"}) {
      const std::string port = "p-" + host;
      const std::string address = "10.97.0." + std::to_string(++n);
      if (!Sh("ip -n " + sw + " link add " + port + " type veth peer name eth0 netns " +
              Ns(host)) ||
          !Sh("ip -n " + sw + " link set " + port + " master br0 up") ||
          !Sh("ip -n " + Ns(host) + " addr add " + address + "/24 dev eth0") ||
          !Sh("ip -n " + Ns(host) + " link set eth0 up")) {
        return false;
      }
    }
    return true;
  }

  // GET /v1/stats of a server in `host`'s namespace: a thread joins that namespace for the
  // request (setns applies to the calling thread only).
  nlohmann::json Stats(const std::string& host, const std::string& url) const {
    nlohmann::json out = nlohmann::json::object();
    std::thread([&] {
      const int fd = ::open(("/var/run/netns/" + Ns(host)).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      const bool joined = ::setns(fd, CLONE_NEWNET) == 0;
      ::close(fd);
      if (!joined) return;
      httplib::Client client(url);
      auto r = client.Get("/v1/stats");
      if (r && r->status == 200) out = nlohmann::json::parse(r->body, nullptr, false);
    }).join();
    return out;
  }

  static bool Sh(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
  }

 private:
  std::string prefix_;
  std::vector<std::string> made_;
};

int Compiles(const nlohmann::json& stats) {
  return stats.contains("compiles") ? stats["compiles"].get<int>() : -1;
}

struct HostsRow {
  std::string mode;
  Outcome outcome;
  int origin = 0, host_a = 0, host_b = 0;
};

// The multi-host mode; false when namespaces cannot be made here (the reason printed).
bool RunHosts(const std::string& self, int processes, const std::vector<std::string>& graphs,
              const fs::path& root, std::vector<HostsRow>& rows) {
  Hosts hosts("hcf" + std::to_string(::getpid() % 100000));
  if (!hosts.Build()) {
    std::printf(
        "\nmulti-host mode skipped: network namespaces cannot be made here (needs root "
        "and iproute2)\n");
    return false;
  }
  const std::string listen = std::string(Hosts::kOriginAddress) + ":7070";
  hlocache::testing::ServerProcess origin(
      HLOCACHE_BINARY, root / "origin", {"--listen", listen, "--insecure-open", "--access-log", ""},
      hosts.Launcher("origin"));
  if (!origin.started()) {
    std::fprintf(stderr, "the origin did not start:\n%s\n", origin.output().c_str());
    return false;
  }
  const std::string origin_url = "http://" + listen;
  const std::string local = "http://127.0.0.1:7070";
  int generation = 0;
  auto start_host = [&](const std::string& host) {
    return std::make_unique<hlocache::testing::ServerProcess>(
        HLOCACHE_BINARY, root / (host + std::to_string(generation)),
        std::vector<std::string>{"--listen", "127.0.0.1:7070", "--upstream", origin_url,
                                 "--access-log", ""},
        hosts.Launcher(host));
  };
  auto host_a = start_host("a");
  auto host_b = start_host("b");
  if (!host_a->started() || !host_b->started()) {
    std::fprintf(stderr, "a per-host cache did not start:\n%s%s\n", host_a->output().c_str(),
                 host_b->output().c_str());
    return false;
  }
  auto on_host = [&](int p) { return hosts.Launcher(p % 2 == 0 ? "a" : "b"); };
  int origin_before = 0, a_before = 0, b_before = 0;
  auto run = [&](const std::string& mode) {
    HostsRow row;
    row.mode = mode;
    row.outcome = RunFleet(self, local, processes, graphs, root, "hosts", on_host);
    const int origin_now = Compiles(hosts.Stats("origin", origin_url));
    const int a_now = Compiles(hosts.Stats("a", local));
    const int b_now = Compiles(hosts.Stats("b", local));
    row.origin = origin_now - origin_before;
    row.host_a = a_now - a_before;
    row.host_b = b_now - b_before;
    origin_before = origin_now;
    a_before = a_now;
    b_before = b_now;
    rows.push_back(row);
  };
  run("hosts, cold");
  run("hosts, warm");
  host_a->Stop();
  host_b->Stop();
  ++generation;
  host_a = start_host("a");
  host_b = start_host("b");
  a_before = b_before = 0;
  run("new hosts, origin warm");
  host_a->Stop();
  host_b->Stop();
  origin.Stop();
  return true;
}

struct BucketRow {
  std::string mode;
  Outcome outcome;
  int origins = -1, hosts = -1;  // Compiles on the origins and on the hosts' caches; -1: none.
};

// A hit's latency from one tier, as a process sees it: a fresh cache on that tier alone, no
// in-process memory, each graph looked up `rounds` times (key, fetch, check, load).
struct HitLatency {
  std::string tier;
  double median_ms = 0, p90_ms = 0, fetch_median_ms = 0;
  int failed = 0;
};

HitLatency MeasureHits(const std::string& tier, const std::string& spec,
                       const std::vector<std::string>& graphs, int rounds) {
  HitLatency out;
  out.tier = tier;
  hlocache::client::CacheOptions options;
  options.memory_bytes = 0;
  options.read_only = true;
  options.log = [](std::string_view) {};
  auto cache = hlocache::client::Cache::Open(spec, options);
  if (!cache) {
    out.failed = 1;
    return out;
  }
  std::vector<double> total, fetch;
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& file : graphs) {
      auto text = hlocache::ReadWholeFile(file);
      auto exe =
          text ? (*cache)->GetOrCompile(*text)
               : hlocache::Result<hlocache::client::Executable>(hlocache::Error(text.error()));
      using hlocache::client::Source;
      if (!exe || (exe->source != Source::kLocal && exe->source != Source::kRemote)) {
        ++out.failed;
        continue;
      }
      total.push_back(exe->total_seconds * 1e3);
      fetch.push_back(exe->lookup_seconds * 1e3);
    }
  }
  auto quantile = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
  };
  out.median_ms = quantile(total, 0.5);
  out.p90_ms = quantile(total, 0.9);
  out.fetch_median_ms = quantile(fetch, 0.5);
  return out;
}

// The bucket mode; false when no Ceph cluster can be started here (the reason printed).
bool RunBucket(const std::string& self, int processes, const std::vector<std::string>& graphs,
               const fs::path& root, std::vector<BucketRow>& rows,
               std::vector<HitLatency>& latencies) {
  const fs::path cluster = root / "ceph";
  const std::string script = std::string("bash ") + HLOCACHE_CEPH_SCRIPT;
  if (std::system(
          (script + " start " + cluster.string() + " >" + (root / "ceph.log").string() + " 2>&1")
              .c_str()) != 0) {
    std::printf("\nbucket mode skipped: no Ceph cluster (ceph-mon, ceph-osd, radosgw) here\n");
    return false;
  }
  auto env = hlocache::ReadWholeFile(cluster / "env");
  std::string line;
  for (const char c : env ? *env : "") {
    if (c != '\n') {
      line += c;
      continue;
    }
    if (const size_t eq = line.find('='); eq != std::string::npos) {
      ::setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);  // The children's.
    }
    line.clear();
  }
  const std::string bucket = "s3://hlocache-test/fleet" + std::to_string(::getpid());
  auto run = [&](const std::string& mode, int generation) {
    const std::string spec =
        generation < 0
            ? bucket
            : (root / ("disk" + std::to_string(generation) + "-%p")).string() + "," + bucket;
    rows.push_back({mode, RunFleet(self, spec, processes, graphs, root, "bucket")});
  };
  run("bucket, cold", 0);
  run("bucket, warm", 0);
  run("bucket, new hosts", 1);
  // The bucket as the only tier: what fetching costs, without the copy into a new directory.
  run("bucket alone, new processes", -1);

  // Two origins in front of another (empty) bucket, and two hosts' caches in front of both
  // origins and the bucket (serve --upstream O1,O2,BUCKET); the processes alternate hosts.
  const std::string fleet_bucket = "s3://hlocache-test/origins" + std::to_string(::getpid());
  using hlocache::testing::ServerProcess;
  ServerProcess o1(HLOCACHE_BINARY, root / "o1", {"--upstream", fleet_bucket, "--access-log", ""});
  ServerProcess o2(HLOCACHE_BINARY, root / "o2", {"--upstream", fleet_bucket, "--access-log", ""});
  if (!o1.started() || !o2.started()) {
    std::fprintf(stderr, "an origin did not start:\n%s%s\n", o1.output().c_str(),
                 o2.output().c_str());
    std::system((script + " stop " + cluster.string() + " >/dev/null 2>&1").c_str());
    return false;
  }
  const std::string upstream = o1.url() + "," + o2.url() + "," + fleet_bucket;
  int generation = 0;
  auto start_host = [&](const std::string& host) {
    return std::make_unique<ServerProcess>(
        HLOCACHE_BINARY, root / ("fleet-" + host + std::to_string(generation)),
        std::vector<std::string>{"--upstream", upstream, "--access-log", ""});
  };
  auto host_a = start_host("a");
  auto host_b = start_host("b");
  auto compiles_of = [](const ServerProcess& server) {
    auto r = server.Client()->Get("/v1/stats");
    return r && r->status == 200 ? nlohmann::json::parse(r->body)["compiles"].get<int>() : -1;
  };
  int origins_before = 0;
  auto run_fleet = [&](const std::string& mode) {
    BucketRow row;
    row.mode = mode;
    row.outcome = RunFleet(self, "", processes, graphs, root, "fleet", {},
                           [&](int p) { return (p % 2 == 0 ? host_a : host_b)->url(); });
    const int origins_now = compiles_of(o1) + compiles_of(o2);
    row.origins = origins_now - origins_before;
    origins_before = origins_now;
    row.hosts = compiles_of(*host_a) + compiles_of(*host_b);
    rows.push_back(row);
  };
  run_fleet("2 origins + bucket, cold");
  run_fleet("2 origins + bucket, warm");
  host_a->Stop();
  host_b->Stop();
  ++generation;
  host_a = start_host("a");
  host_b = start_host("b");
  run_fleet("2 origins + bucket, new hosts");

  // A hit's latency from each kind of tier: a process's own directory (the bucket mode's first
  // process), an origin over HTTP on loopback (which now holds every graph), the bucket.
  constexpr int kRounds = 5;
  MeasureHits("origin", o1.url(), graphs, 1);  // Once, so the origin holds every graph itself.
  latencies.push_back(MeasureHits("local directory", (root / "disk0-0").string(), graphs, kRounds));
  latencies.push_back(MeasureHits("origin (HTTP, loopback)", o1.url(), graphs, kRounds));
  latencies.push_back(MeasureHits("bucket (Ceph RGW, loopback)", bucket, graphs, kRounds));
  host_a->Stop();
  host_b->Stop();
  o1.Stop();
  o2.Stop();
  std::system((script + " stop " + cluster.string() + " >/dev/null 2>&1").c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--child") {
    return Child(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  // A cold fleet: every compile runs the compiler, none is taken from this host's object
  // cache (the children inherit this).
  ::setenv("HLOCACHE_OBJECT_CACHE", "-", 1);
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
  std::vector<HostsRow> host_rows;
  const bool multi_host = RunHosts(self, processes, graphs, root, host_rows);
  std::vector<BucketRow> bucket_rows;
  std::vector<HitLatency> latencies;
  const bool on_bucket = RunBucket(self, processes, graphs, root, bucket_rows, latencies);
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
  bool ok = none.failed + cold.failed + warm.failed == 0;
  if (multi_host) {
    std::printf(
        "\n%d processes on 2 hosts (network namespaces), each host behind its own `serve "
        "--upstream` cache:\n\n| mode | wall s | compiles on the origin | on host a | on host b "
        "| in the processes | vs no cache |\n|---|---:|---:|---:|---:|---:|---:|\n",
        processes);
    for (const HostsRow& r : host_rows) {
      std::printf("| %s | %.2f | %d | %d | %d | %d | %.1fx |\n", r.mode.c_str(), r.outcome.seconds,
                  r.origin, r.host_a, r.host_b, r.outcome.here, none.seconds / r.outcome.seconds);
      ok = ok && r.outcome.failed == 0;
    }
    std::printf(
        "\nhosts, cold: %d compiles on the origin for %zu graphs (target: exactly %zu), "
        "%d on the hosts (target: 0)\n",
        host_rows[0].origin, count, count, host_rows[0].host_a + host_rows[0].host_b);
  }
  if (on_bucket) {
    std::printf(
        "\n%d processes, each with a directory of its own in front of one bucket (Ceph, "
        "loopback), no server:\n\n| mode | wall s | compiles in the processes | hits | vs no "
        "cache |\n|---|---:|---:|---:|---:|\n",
        processes);
    for (const BucketRow& r : bucket_rows) {
      if (r.origins >= 0) continue;
      std::printf("| %s | %.2f | %d | %d | %.1fx |\n", r.mode.c_str(), r.outcome.seconds,
                  r.outcome.here, r.outcome.hits, none.seconds / r.outcome.seconds);
      ok = ok && r.outcome.failed == 0;
    }
    std::printf(
        "\n%d processes on two hosts' caches (serve --upstream O1,O2,BUCKET), two origins in "
        "front of one bucket (serve --upstream BUCKET):\n\n| mode | wall s | compiles on the "
        "origins | on the hosts | in the processes | vs no cache "
        "|\n|---|---:|---:|---:|---:|---:|\n",
        processes);
    for (const BucketRow& r : bucket_rows) {
      if (r.origins < 0) continue;
      std::printf("| %s | %.2f | %d | %d | %d | %.1fx |\n", r.mode.c_str(), r.outcome.seconds,
                  r.origins, r.hosts, r.outcome.here, none.seconds / r.outcome.seconds);
      ok = ok && r.outcome.failed == 0;
    }
    std::printf(
        "\nA hit's latency, one process on one tier, %zu graphs x 5 (key, fetch, check, load; "
        "no in-process memory):\n\n| tier | median ms | p90 ms | fetch, check and load, median ms "
        "|\n|---|---:|---:|---:|\n",
        graphs.size());
    for (const HitLatency& h : latencies) {
      std::printf("| %s | %.2f | %.2f | %.2f |\n", h.tier.c_str(), h.median_ms, h.p90_ms,
                  h.fetch_median_ms);
      ok = ok && h.failed == 0;
    }
  }
  std::printf(
      "\ncold: %d compiles for %zu graphs (target: exactly %zu); warm: %.1fx faster than "
      "no cache (target: at least 20x)%s\n",
      cold_compiles + cold.here, count, count, none.seconds / warm.seconds,
      ok ? "" : "; SOME PROCESSES FAILED");
  return ok ? 0 : 1;
}
