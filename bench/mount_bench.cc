// mount_bench: `hlocache mount` against a plain directory on the same disk, in one run.
//
//   stat, hit / miss     median of stat(2) over 200 distinct names each (a name is asked of
//                        the mount once: later stats of it are the kernel's cache)
//   1 MiB open+read      median over 50 files: cold (only on the server: fetched, verified
//                        and kept in the local tier on open) and warm (in the local tier, the
//                        mount just started, so the kernel has none of it cached)
//   256 MiB read         one file, 1 MiB reads: cold and warm as above, as throughput
//                        and again on the same mount (the kernel's page cache serves it)
// The plain directory's files are in the page cache, as the local tier's are.
//
// Usage: mount_bench [WORK_DIR] (default: a directory under $TMPDIR). Needs root and /dev/fuse.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/server_harness.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable"
#endif

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double Micros(Clock::time_point since) {
  return std::chrono::duration<double, std::micro>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

bool Mounted(const fs::path& mountpoint) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  const std::string needle = " " + fs::weakly_canonical(mountpoint).string() + " ";
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos && line.find("fuse.hlocache") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// `hlocache mount` in a child process.
class MountProcess {
 public:
  MountProcess(const fs::path& mountpoint, const std::string& cache, const fs::path& state)
      : mountpoint_(mountpoint) {
    fs::create_directories(mountpoint);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::execl(HLOCACHE_BINARY, HLOCACHE_BINARY, "mount", mountpoint.c_str(), "--cache",
              cache.c_str(), "--state", state.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 3000 && !Mounted(mountpoint); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ok_ = Mounted(mountpoint);
  }
  ~MountProcess() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  bool ok() const { return ok_; }

 private:
  fs::path mountpoint_;
  pid_t pid_ = -1;
  bool ok_ = false;
};

double StatMicros(const fs::path& path) {
  struct stat st {};
  const auto start = Clock::now();
  ::stat(path.c_str(), &st);
  return Micros(start);
}

// Reads the whole file in 1 MiB reads; microseconds from open to the last byte.
double ReadMicros(const fs::path& path, size_t* bytes = nullptr) {
  static std::string buffer(1 << 20, '\0');
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  size_t total = 0;
  ssize_t n;
  while (fd >= 0 && (n = ::read(fd, buffer.data(), buffer.size())) > 0) {
    total += static_cast<size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  if (bytes != nullptr) *bytes = total;
  return Micros(start);
}

void Row(const char* what, const char* unit, double mount, double plain, bool higher_better) {
  if (plain <= 0) {
    std::printf("| %-34s | %10.1f %-4s | %16s | %9s |\n", what, mount, unit, "-", "-");
    return;
  }
  const double ratio = higher_better ? mount / plain : plain / mount;
  std::printf("| %-34s | %10.1f %-4s | %11.1f %-4s | %8.2fx |\n", what, mount, unit, plain, unit,
              ratio);
}

}  // namespace

int main(int argc, char** argv) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    std::printf("mount_bench: skipped: /dev/fuse is not available\n");
    return 0;
  }
  const fs::path work =
      argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "hlocache-mount-bench";
  // Mounts a run killed halfway left behind.
  for (const char* m : {"m0", "m1", "m2", "m3"}) ::umount2((work / m).c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work);
  hlocache::testing::ServerProcess server(HLOCACHE_BINARY, work / "server");
  if (!server.started()) {
    std::fprintf(stderr, "mount_bench: the server did not start: %s\n", server.output().c_str());
    return 1;
  }
  const fs::path plain = work / "plain";
  fs::create_directories(plain);
  constexpr int kNames = 200, kSmall = 50;
  const std::string one_mib = Bytes(1 << 20, 1);
  const std::string big = Bytes(size_t{256} << 20, 2);

  // Written through a first mount, so the server has them; the plain directory gets the same.
  {
    MountProcess writer(work / "m0", server.url(), work / "state0");
    if (!writer.ok()) {
      std::fprintf(stderr, "mount_bench: the mount did not start\n");
      return 1;
    }
    for (const fs::path& root : {work / "m0", plain}) {
      for (int i = 0; i < kNames; ++i) std::ofstream(root / ("s" + std::to_string(i))) << i;
      for (int i = 0; i < kSmall; ++i) {
        std::ofstream(root / ("m" + std::to_string(i)), std::ios::binary) << one_mib;
      }
      std::ofstream(root / "big", std::ios::binary) << big;
    }
    // Until the uploads are done: the server's listing holds every name.
    for (int i = 0; i < 600; ++i) {
      auto listed = server.Client()->Get("/v1/files/files?prefix=big");
      if (listed && listed->body.find("\"big\"") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }

  std::vector<double> stat_hit, stat_miss, plain_hit, plain_miss, cold_small, warm_small,
      plain_small;
  double cold_big = 0, warm_big = 0, again_big = 0, plain_big = 0;
  size_t got = 0;
  {
    // Cold: a new mount with an empty local tier.
    MountProcess cold(work / "m1", server.url(), work / "state1");
    for (int i = 0; i < kSmall; ++i) {
      cold_small.push_back(ReadMicros(work / "m1" / ("m" + std::to_string(i))) / 1000);
    }
    cold_big = ReadMicros(work / "m1" / "big", &got);
    if (got != big.size()) std::fprintf(stderr, "mount_bench: cold read got %zu bytes\n", got);
    for (int i = 0; i < kNames; ++i) {
      stat_miss.push_back(StatMicros(work / "m1" / ("absent" + std::to_string(i))));
    }
  }
  {
    // Warm: the same local tier, a new mount (so nothing is in the kernel's cache of it).
    MountProcess warm(work / "m2", server.url(), work / "state1");
    for (int i = 0; i < kNames; ++i) {
      ReadMicros(work / "m2" / ("s" + std::to_string(i)));  // Fetched into the local tier.
    }
  }
  {
    MountProcess warm(work / "m3", server.url(), work / "state1");
    for (int i = 0; i < kNames; ++i) {
      stat_hit.push_back(StatMicros(work / "m3" / ("s" + std::to_string(i))));
    }
    for (int i = 0; i < kSmall; ++i) {
      warm_small.push_back(ReadMicros(work / "m3" / ("m" + std::to_string(i))) / 1000);
    }
    warm_big = ReadMicros(work / "m3" / "big", &got);
    // Opened again on the same mount: the kernel keeps the pages of a committed file.
    again_big = ReadMicros(work / "m3" / "big", &got);
  }
  for (int i = 0; i < kNames; ++i) {
    plain_hit.push_back(StatMicros(plain / ("s" + std::to_string(i))));
    plain_miss.push_back(StatMicros(plain / ("absent" + std::to_string(i))));
  }
  for (int i = 0; i < kSmall; ++i) {
    plain_small.push_back(ReadMicros(plain / ("m" + std::to_string(i))) / 1000);
  }
  plain_big = ReadMicros(plain / "big");

  const double mb = static_cast<double>(big.size()) / (1 << 20);
  std::printf(
      "mount_bench: hlocache mount (server on loopback) against a plain directory on "
      "the same disk\n\n");
  std::printf("| %-34s | %15s | %16s | %9s |\n", "operation", "hlocache mount", "plain directory",
              "vs plain");
  std::printf("|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(17, '-').c_str(),
              std::string(18, '-').c_str(), std::string(10, '-').c_str());
  Row("stat, hit (local tier)", "us", Median(stat_hit), Median(plain_hit), false);
  Row("stat, miss (asks the server)", "us", Median(stat_miss), Median(plain_miss), false);
  Row("1 MiB open+read, cold (server)", "ms", Median(cold_small), 0, false);
  Row("1 MiB open+read, warm (local tier)", "ms", Median(warm_small), Median(plain_small), false);
  Row("256 MiB read, cold (server)", "MB/s", mb / (cold_big / 1e6), 0, true);
  Row("256 MiB read, warm (local tier)", "MB/s", mb / (warm_big / 1e6), mb / (plain_big / 1e6),
      true);
  Row("256 MiB read again (page cache)", "MB/s", mb / (again_big / 1e6), mb / (plain_big / 1e6),
      true);
  fs::remove_all(work);
  return 0;
}
