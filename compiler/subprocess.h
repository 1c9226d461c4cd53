// Child processes for compiles: the C++ compiler, and `hlocache compile-worker`.
//
// A child runs in a process group of its own (unless told otherwise), with a time limit and
// optional resource limits. When it exits or runs out of time the whole group is killed, so
// nothing it started (cc1plus, as, ld) outlives it. Its standard output and error go to one file in
// its working folder; standard input is /dev/null.
//
// Thread safety: RunProcess may be called from many threads at once. It forks; between fork
// and exec the child only makes async-signal-safe calls.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hlocache::compiler {

// A temporary folder, removed with everything in it when this goes away.
class TempDir {
 public:
  // Makes `root`/`prefix`XXXXXX. kIoError when it cannot.
  static Result<TempDir> Make(const std::filesystem::path& root, const std::string& prefix);
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TempDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// $TMPDIR, or /tmp without it.
std::filesystem::path DefaultTempRoot();

struct ProcessLimits {
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  uint64_t memory_bytes = 0;  // RLIMIT_AS; 0 for none.
  uint64_t cpu_seconds = 0;   // RLIMIT_CPU; 0 for none.
  // False: stay in the caller's process group, so that whoever kills the caller's group (the
  // worker pool killing a compile worker) kills this child too.
  bool own_process_group = true;
};

struct ProcessOutcome {
  bool timed_out = false;
  int exit_code = -1;  // When it exited.
  int signal = 0;      // When a signal ended it.
  std::string output;  // Its standard output and error together.
};

// Runs `program` with `args` in `cwd`, its output in `cwd`/`output_name`. `on_started` (if set)
// is called with the child's pid once it runs. kIoError when it cannot be started or waited for.
Result<ProcessOutcome> RunProcess(const std::filesystem::path& program,
                                  const std::vector<std::string>& args,
                                  const std::filesystem::path& cwd, const ProcessLimits& limits,
                                  const std::string& output_name = "output.txt",
                                  const std::function<void(pid_t)>& on_started = {});

// The first `max_lines` non-empty lines of a process's output, joined by " | ".
std::string FirstLines(const std::string& output, size_t max_lines);

}  // namespace hlocache::compiler
