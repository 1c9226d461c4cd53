// The compile worker pool: every compile runs in a child process, `hlocache compile-worker`,
// so that a compiler crash, a hang or a runaway allocation fails one job and never its caller.
//
// Each job gets a temporary folder of its own (the HLO text goes in, the artifact comes out, and
// the C++ toolchain works there); the folder is removed when the job ends, however it ends. The
// worker and the compilers it starts share one process group, which is killed when the job
// ends or runs past its time limit. The artifact a worker returns is checked (container and
// checksum) before any caller sees it.
//
// Concurrent requests for one key share one compile (single-flight): the first caller runs it,
// the others wait for its outcome, success or failure. At most `workers` compiles run at once;
// up to `max_queue` more wait for a slot, and a request beyond that is refused at once with
// kResourceExhausted ("the compile queue is full"), never left waiting without bound.
//
// Thread safety: Compile may be called from any number of threads. The pool must outlive the
// calls; destroying it while a Compile runs is undefined.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hlocache::compiler {

struct WorkerPoolOptions {
  // The `hlocache` executable, run as `hlocache compile-worker ...`.
  std::filesystem::path worker_binary;
  // Extra arguments for every worker, e.g. {"--cxx", "/usr/bin/clang++"}.
  std::vector<std::string> worker_args;
  size_t workers = 2;
  size_t max_queue = 64;
  // A job still running after this long is killed, with its compilers.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // RLIMIT_AS for the C++ compiler's processes, RLIMIT_CPU for the worker's; 0 for none.
  uint64_t memory_limit_bytes = uint64_t{16} << 30;
  uint64_t cpu_seconds_limit = 0;
  // Where job folders are made; empty for $TMPDIR or /tmp.
  std::filesystem::path temp_root;
  // Called with each worker's pid when it starts (for tests and logs).
  std::function<void(pid_t)> on_worker_started;
};

struct CompileRequest {
  std::string key;       // Single-flight identity, and the key written in the artifact.
  std::string hlo_text;  // The module.
  std::string target;    // Empty for this host's best CPU level.
  std::string name;      // For error messages: "file.hlo:12: ...".
  // Called by the compiling request with the checked artifact before the compile's waiters are
  // released and before the key is free for a new compile (a server stores it here, so no
  // request for the key can miss in between). Optional; must not call back into the pool.
  std::function<void(const std::string& artifact)> publish;
  // Called by the compiling request once its flight is registered, before it waits for a
  // worker: an artifact it returns is the outcome (coalesced, nothing compiled). A server
  // looks in its store, so a compile that was published after the server's own lookup is
  // not run again. Optional; must not call back into the pool.
  std::function<std::optional<std::string>()> find;
};

struct CompileOutcome {
  std::string artifact;    // Checked container bytes.
  bool coalesced = false;  // Another request's compile served this one.
  double seconds = 0;      // Wall time of this call.
};

struct WorkerPoolStats {
  uint64_t compiles = 0;   // Jobs that produced an artifact.
  uint64_t failures = 0;   // Jobs that failed (bad input, compiler error, crash, timeout).
  uint64_t coalesced = 0;  // Requests served by another request's job.
  uint64_t rejected = 0;   // Requests refused because the queue was full.
  size_t running = 0;
  size_t waiting = 0;
};

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Compiles (or joins the compile of) `request.key`. Errors: what the worker reports, with its
  // code (kInvalidArgument for HLO that does not parse, with file:line:col; kFailedPrecondition
  // for unsupported ops; kInternal for a C++ compiler failure with its first lines, or a worker
  // killed by a signal); kDeadlineExceeded for a job past its time limit; kResourceExhausted for a
  // full queue; kDataLoss if the worker's artifact does not verify; kIoError for the job folder.
  Result<CompileOutcome> Compile(const CompileRequest& request);

  WorkerPoolStats stats() const;

 private:
  struct Flight;
  Result<std::string> RunJob(const CompileRequest& request);

  const WorkerPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable slot_free_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
  WorkerPoolStats stats_;
};

}  // namespace hlocache::compiler
