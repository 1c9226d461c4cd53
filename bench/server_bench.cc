// server_bench: artifact hits from `hlocache serve`, side by side with nginx serving the same
// bytes as static files and Redis GETs of the same values, all over loopback in one run.
//
// hlocache and nginx are loaded with wrk (-t2, keep-alive) at 8 and at 64 connections; Redis
// with redis-benchmark (its own protocol, which wrk cannot speak) at the same counts. Prints
// requests/s, MB/s and the p50, p99 and p99.9 latencies for 4 KiB and 1 MiB hits, with the
// hlocache/nginx ratios of throughput and of p99. hlocache serves with its defaults, its memory
// tier on (server/memory_tier.h: hits of 64 KiB and more copied from memory into the socket).
// Two more hlocache servers give the 1 MiB rows of a hit sent from the tier's file pages
// (`--zero-copy`: splice, as nginx's sendfile) and of a hit read from the store each time
// (`--memory-tier 0`).
//
// Those runs load both servers as fast as wrk can, and on a machine of few cores wrk and the
// server then share them: the p99 is then mostly time spent waiting for a core. A second table
// paces the load (each connection waits a fixed time before its next request, through wrk's
// delay() hook) to at most half the rate nginx reached in the same run (less where the wait
// would be under 1 ms, the least delay() takes), and gives both servers' latencies at that same
// offered load: the tail a client sees from a server that is not saturated.
//
// On a shared machine one run of a few seconds moves by a third from the next (nginx's rate
// most), so hlocache, nginx and the two variants are each run `rounds` times, in turn, and
// the table gives the median of each figure; a second table gives each round's ratios.
//
// Usage: server_bench [seconds per run, default 5] [rounds, default 3]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/server_harness.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable"
#endif

namespace fs = std::filesystem;
using hlocache::testing::CommandOutput;
using hlocache::testing::MakeArtifact;
using hlocache::testing::ServerProcess;
using hlocache::testing::TestKey;

namespace {

struct Load {
  double requests_per_second = 0;
  double megabytes_per_second = 0;
  double p50_ms = 0, p99_ms = 0, p999_ms = -1;  // -1: not measured.
  bool ok = false;
};

// Prints the percentiles wrk's --latency summary lacks (p99.9), in microseconds, on a line of
// their own.
constexpr const char* kPercentileScript = R"(done = function(summary, latency, requests)
  io.write(string.format("percentiles-us %d %d %d\n", latency:percentile(50),
                         latency:percentile(99), latency:percentile(99.9)))
end
)";

// The percentile script, with each connection waiting `delay_ms` before each request.
std::string PacedScript(int delay_ms) {
  return "function delay() return " + std::to_string(delay_ms) + " end\n" + kPercentileScript;
}

// The wait between requests that makes `connections` connections offer at most half of
// `saturated_rps` (whole milliseconds, at least one: what wrk's delay() takes).
int HalfRateDelayMs(int connections, double saturated_rps) {
  if (saturated_rps <= 0) return 1;
  const double ms = connections * 1000.0 / (saturated_rps / 2);
  return std::max(1, static_cast<int>(std::ceil(ms)));
}

double Number(const std::string& text, const std::string& after) {
  const size_t at = text.find(after);
  if (at == std::string::npos) return 0;
  std::istringstream in(text.substr(at + after.size()));
  double value = 0;
  std::string unit;
  in >> value >> unit;
  return value;
}

Load Wrk(const std::string& url, int seconds, size_t bytes, int connections,
         const fs::path& script) {
  const std::string out =
      CommandOutput("wrk -t2 -c" + std::to_string(connections) + " -d" + std::to_string(seconds) +
                    "s -s " + script.string() + " " + url);
  Load load;
  load.requests_per_second = Number(out, "Requests/sec:");
  load.megabytes_per_second = load.requests_per_second * static_cast<double>(bytes) / 1e6;
  const size_t at = out.find("percentiles-us ");
  if (at != std::string::npos) {
    std::istringstream in(out.substr(at + 15));
    double p50 = 0, p99 = 0, p999 = 0;
    in >> p50 >> p99 >> p999;
    load.p50_ms = p50 / 1000;
    load.p99_ms = p99 / 1000;
    load.p999_ms = p999 / 1000;
  }
  const bool errors =
      out.find("Non-2xx") != std::string::npos || out.find("Socket errors") != std::string::npos;
  load.ok = load.requests_per_second > 0 && at != std::string::npos && !errors;
  if (!load.ok) std::fprintf(stderr, "wrk %s:\n%s\n", url.c_str(), out.c_str());
  return load;
}

pid_t Spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      ::dup2(fileno(f), 1);
      ::dup2(fileno(f), 2);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

void Reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

int FreePort(int base) { return base + static_cast<int>(::getpid() % 1000); }

// Each figure's median over `runs` (taken one figure at a time: the median rate and the median
// p99 may come from different runs); ok when every run was.
Load Median(const std::vector<Load>& runs) {
  auto median = [&](double Load::*field) {
    std::vector<double> v;
    for (const Load& l : runs) v.push_back(l.*field);
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  Load m;
  m.requests_per_second = median(&Load::requests_per_second);
  m.megabytes_per_second = median(&Load::megabytes_per_second);
  m.p50_ms = median(&Load::p50_ms);
  m.p99_ms = median(&Load::p99_ms);
  m.p999_ms = median(&Load::p999_ms);
  m.ok = !runs.empty() && std::all_of(runs.begin(), runs.end(), [](const Load& l) { return l.ok; });
  return m;
}

// Whether `program` is an executable file in one of PATH's directories.
bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (seconds < 1 || rounds < 1) {
    std::fprintf(stderr,
                 "usage: server_bench [seconds per run, at least 1] [rounds, at least 1]\n");
    return 1;
  }
  // Without its peers the run would print a table of zeros: say which one is missing instead.
  for (const char* peer : {"wrk", "nginx", "redis-server", "redis-benchmark"}) {
    if (!OnPath(peer)) {
      std::fprintf(stderr, "server_bench: %s is not installed (`make bench` installs the peers)\n",
                   peer);
      return 1;
    }
  }
  const fs::path root =
      fs::temp_directory_path() / ("hlocache-server-bench-" + std::to_string(::getpid()));
  fs::create_directories(root / "static");

  struct Size {
    const char* name;
    size_t payload;
    std::string key, bytes;
  };
  std::vector<Size> sizes = {{"4 KiB", 4096 - 300, {}, {}}, {"1 MiB", (1u << 20) - 300, {}, {}}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    sizes[i].key = TestKey(900 + i);
    sizes[i].bytes = MakeArtifact(sizes[i].key, sizes[i].payload, i);
    std::ofstream(root / "static" / sizes[i].key, std::ios::binary) << sizes[i].bytes;
  }

  // hlocache, without an access log (nginx's is off too).
  ServerProcess hlocache(HLOCACHE_BINARY, root / "store", {"--access-log", ""});
  if (!hlocache.started()) {
    std::fprintf(stderr, "hlocache did not start:\n%s\n", hlocache.output().c_str());
    return 1;
  }
  // Two variants, on large hits only: the tier's bodies sent from its file's pages
  // (--zero-copy), and no tier (each hit read from the store).
  ServerProcess zero_copy(HLOCACHE_BINARY, root / "zero-copy", {"--access-log", "", "--zero-copy"});
  ServerProcess store_only(HLOCACHE_BINARY, root / "store-only",
                           {"--access-log", "", "--memory-tier", "0"});
  for (ServerProcess* server : {&zero_copy, &store_only}) {
    if (!server->started()) {
      std::fprintf(stderr, "hlocache did not start:\n%s\n", server->output().c_str());
      return 1;
    }
  }
  for (ServerProcess* server : {&hlocache, &zero_copy, &store_only}) {
    for (const Size& s : sizes) {
      auto r = server->Client()->Put(("/v1/artifacts/" + s.key).c_str(), s.bytes,
                                     "application/octet-stream");
      if (!r || r->status >= 300) {
        std::fprintf(stderr, "upload failed\n");
        return 1;
      }
    }
  }

  const int nginx_port = FreePort(20000);
  std::ofstream(root / "nginx.conf")
      << "daemon off;\nuser root;\nworker_processes 2;\npid " << (root / "nginx.pid").string()
      << ";\nerror_log " << (root / "nginx.error.log").string()
      << ";\nevents { worker_connections 1024; }\nhttp {\n  access_log off;\n  sendfile on;\n"
      << "  tcp_nopush on;\n  tcp_nodelay on;\n  keepalive_requests 1000000;\n"
      << "  default_type application/octet-stream;\n  client_body_temp_path " << root.string()
      << ";\n  proxy_temp_path " << root.string() << ";\n  fastcgi_temp_path " << root.string()
      << ";\n  uwsgi_temp_path " << root.string() << ";\n  scgi_temp_path " << root.string()
      << ";\n  server {\n    listen 127.0.0.1:" << nginx_port << ";\n    root "
      << (root / "static").string() << ";\n  }\n}\n";
  const pid_t nginx = Spawn({"nginx", "-c", (root / "nginx.conf").string()}, root / "nginx.log");
  const int redis_port = FreePort(21000);
  const pid_t redis = Spawn({"redis-server", "--port", std::to_string(redis_port), "--save", "",
                             "--appendonly", "no", "--bind", "127.0.0.1"},
                            root / "redis.log");
  // The HTTP library's own ceiling: a bare cpp-httplib server in this process answering every
  // GET with a static buffer of the artifact's size (TCP_NODELAY on, as hlocache sets it).
  httplib::Server bare;
  bare.new_task_queue = [] { return new httplib::ThreadPool(64); };  // As many as hlocache's.
  bare.set_tcp_nodelay(true);
  bare.set_keep_alive_max_count(1000);
  for (const Size& s : sizes) {
    const std::string* bytes = &s.bytes;
    bare.Get("/" + s.key, [bytes](const httplib::Request&, httplib::Response& res) {
      res.set_content(*bytes, "application/octet-stream");
    });
  }
  const int bare_port = bare.bind_to_any_port("127.0.0.1");
  std::thread bare_thread([&] { bare.listen_after_bind(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));

  const fs::path script = root / "percentiles.lua";
  std::ofstream(script) << kPercentileScript;

  std::printf(
      "server_bench: hits over loopback, %d s per run, wrk -t2 (redis-benchmark), keep-alive; "
      "hlocache, nginx and (1 MiB) the zero-copy and store-only servers %d rounds each, in turn: "
      "medians\n\n",
      seconds, rounds);
  std::printf(
      "| size | connections | server | requests/s | MB/s | p50 ms | p99 ms | p99.9 ms | "
      "requests/s vs nginx | p99 vs nginx |\n");
  std::printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  bool all_ok = true;
  struct Paced {
    const char* size;
    int connections;
    int delay_ms;
    Load ours, theirs;
  };
  std::vector<Paced> paced;
  struct Round {
    const char* size;
    int connections;
    Load ours, theirs;
  };
  std::vector<Round> each_round;
  for (const Size& s : sizes) {
    for (const int connections : {8, 64}) {
      const std::string n = std::to_string(connections);
      // The memory tier keeps only bodies of 64 KiB and more: a small hit is a store read anyway.
      const bool tiered = s.bytes.size() >= (64 << 10);
      std::vector<Load> our_runs, their_runs, zero_copy_runs, store_runs;
      for (int r = 0; r < rounds; ++r) {
        our_runs.push_back(Wrk(hlocache.url() + "/v1/artifacts/" + s.key, seconds, s.bytes.size(),
                               connections, script));
        their_runs.push_back(Wrk("http://127.0.0.1:" + std::to_string(nginx_port) + "/" + s.key,
                                 seconds, s.bytes.size(), connections, script));
        if (tiered) {
          zero_copy_runs.push_back(Wrk(zero_copy.url() + "/v1/artifacts/" + s.key, seconds,
                                       s.bytes.size(), connections, script));
          store_runs.push_back(Wrk(store_only.url() + "/v1/artifacts/" + s.key, seconds,
                                   s.bytes.size(), connections, script));
        }
        each_round.push_back({s.name, connections, our_runs.back(), their_runs.back()});
      }
      const Load ours = Median(our_runs);
      const Load theirs = Median(their_runs);
      const Load from_pages = tiered ? Median(zero_copy_runs) : Load{};
      const Load from_store = tiered ? Median(store_runs) : Load{};
      // Redis: SET then GET of one value of the same size; the GET row.
      const std::string csv =
          CommandOutput("redis-benchmark -p " + std::to_string(redis_port) + " -t set,get -c " + n +
                        " -d " + std::to_string(s.bytes.size()) + " -n " +
                        std::to_string(s.bytes.size() > 100000 ? 20000 : 200000) + " --csv");
      Load redis_load;
      const size_t get = csv.find("\"GET\"");
      if (get != std::string::npos) {
        std::vector<double> fields;
        std::string line = csv.substr(get, csv.find('\n', get) - get);
        std::stringstream in(line);
        std::string field;
        while (std::getline(in, field, ',')) {
          field.erase(std::remove(field.begin(), field.end(), '"'), field.end());
          fields.push_back(std::atof(field.c_str()));
        }
        // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
        // "p99_latency_ms","max_latency_ms"
        if (fields.size() >= 7) {
          redis_load.requests_per_second = fields[1];
          redis_load.p50_ms = fields[4];
          redis_load.p99_ms = fields[6];
          redis_load.megabytes_per_second =
              redis_load.requests_per_second * static_cast<double>(s.bytes.size()) / 1e6;
          redis_load.ok = true;
        }
      }
      const Load library = Wrk("http://127.0.0.1:" + std::to_string(bare_port) + "/" + s.key,
                               seconds, s.bytes.size(), connections, script);
      all_ok = all_ok && ours.ok && theirs.ok && (!tiered || (from_pages.ok && from_store.ok));
      auto row = [&](const char* server, const Load& l, bool ratio) {
        std::printf("| %s | %d | %s | %.0f | %.0f | %.2f | %.2f | ", s.name, connections, server,
                    l.requests_per_second, l.megabytes_per_second, l.p50_ms, l.p99_ms);
        if (l.p999_ms >= 0) {
          std::printf("%.2f | ", l.p999_ms);
        } else {
          std::printf("- | ");
        }
        if (ratio && theirs.requests_per_second > 0 && theirs.p99_ms > 0) {
          std::printf("%.2fx | %.2fx |\n", l.requests_per_second / theirs.requests_per_second,
                      l.p99_ms / theirs.p99_ms);
        } else {
          std::printf(" | |\n");
        }
      };
      {
        const int delay_ms = HalfRateDelayMs(connections, theirs.requests_per_second);
        const fs::path paced_script = root / ("paced-" + std::to_string(delay_ms) + ".lua");
        std::ofstream(paced_script) << PacedScript(delay_ms);
        Paced p{s.name, connections, delay_ms, {}, {}};
        p.ours = Wrk(hlocache.url() + "/v1/artifacts/" + s.key, seconds, s.bytes.size(),
                     connections, paced_script);
        p.theirs = Wrk("http://127.0.0.1:" + std::to_string(nginx_port) + "/" + s.key, seconds,
                       s.bytes.size(), connections, paced_script);
        all_ok = all_ok && p.ours.ok && p.theirs.ok;
        paced.push_back(p);
      }
      row("hlocache", ours, true);
      if (tiered) {
        row("hlocache, --zero-copy", from_pages, true);
        row("hlocache, --memory-tier 0", from_store, true);
      }
      row("nginx (static file)", theirs, false);
      row("bare cpp-httplib (static buffer)", library, true);
      if (redis_load.ok) row("Redis GET", redis_load, false);
    }
  }
  std::printf(
      "\nEach round (hlocache then nginx, one after the other):\n\n"
      "| size | connections | round | hlocache requests/s | nginx requests/s | requests/s vs nginx "
      "| p99 vs nginx |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < each_round.size(); ++i) {
    const Round& r = each_round[i];
    const double rate = r.theirs.requests_per_second > 0
                            ? r.ours.requests_per_second / r.theirs.requests_per_second
                            : 0;
    const double p99 = r.theirs.p99_ms > 0 ? r.ours.p99_ms / r.theirs.p99_ms : 0;
    std::printf("| %s | %d | %zu | %.0f | %.0f | %.2fx | %.2fx |\n", r.size, r.connections,
                i % static_cast<size_t>(rounds) + 1, r.ours.requests_per_second,
                r.theirs.requests_per_second, rate, p99);
  }
  std::printf(
      "\nAt the same paced load (each connection waits the given time before each request, so "
      "that the load offered is at most half of nginx's rate above):\n\n");
  std::printf(
      "| size | connections | wait ms | server | requests/s | p50 ms | p99 ms | p99.9 ms | "
      "p99 vs nginx |\n");
  std::printf("|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const Paced& p : paced) {
    for (const bool mine : {true, false}) {
      const Load& l = mine ? p.ours : p.theirs;
      std::printf("| %s | %d | %d | %s | %.0f | %.2f | %.2f | %.2f | ", p.size, p.connections,
                  p.delay_ms, mine ? "hlocache" : "nginx (static file)", l.requests_per_second,
                  l.p50_ms, l.p99_ms, l.p999_ms);
      if (mine && p.theirs.p99_ms > 0) {
        std::printf("%.2fx |\n", l.p99_ms / p.theirs.p99_ms);
      } else {
        std::printf(" |\n");
      }
    }
  }
  bare.stop();
  bare_thread.join();
  Reap(nginx);
  Reap(redis);
  hlocache.Stop();
  zero_copy.Stop();
  store_only.Stop();
  std::error_code ec;
  fs::remove_all(root, ec);
  return all_ok ? 0 : 1;
}
