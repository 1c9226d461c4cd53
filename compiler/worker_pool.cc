#include "compiler/worker_pool.h"

#include <string.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "common/file.h"
#include "compiler/artifact/container.h"
#include "compiler/subprocess.h"

namespace hlocache::compiler {
namespace fs = std::filesystem;

struct WorkerPool::Flight {
  std::mutex mu;
  std::condition_variable done_cv;
  std::optional<Result<std::string>> result;
};

namespace {

// A worker reports failure as one line "<code name>: <message>" (Status::ToString); this reads
// the code back, so callers see the worker's error as if the compile had run in-process.
Status ParseWorkerError(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    for (int c = static_cast<int>(StatusCode::kInvalidArgument);
         c <= static_cast<int>(StatusCode::kDeadlineExceeded); ++c) {
      const auto code = static_cast<StatusCode>(c);
      const std::string prefix = std::string(StatusCodeName(code)) + ": ";
      if (line.rfind(prefix, 0) == 0) return Status(code, line.substr(prefix.size()));
    }
  }
  return Internal("the compile worker failed without saying why: " + FirstLines(output, 5));
}

}  // namespace

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)) {}

WorkerPoolStats WorkerPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<CompileOutcome> WorkerPool::Compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto it = flights_.find(request.key); it != flights_.end()) {
      ++stats_.coalesced;
      flight = it->second;
      lock.unlock();
      std::unique_lock<std::mutex> wait(flight->mu);
      flight->done_cv.wait(wait, [&] { return flight->result.has_value(); });
      if (!*flight->result) return Error(flight->result->error());
      return CompileOutcome{**flight->result, true, elapsed()};
    }
    const size_t workers = std::max<size_t>(options_.workers, 1);
    if (stats_.running + stats_.waiting >= workers + options_.max_queue) {
      ++stats_.rejected;
      return Error(ResourceExhausted(
          "the compile queue is full (" + std::to_string(stats_.running) + " compiling, " +
          std::to_string(stats_.waiting) + " waiting); try again later"));
    }
    flight = std::make_shared<Flight>();
    flights_.emplace(request.key, flight);
  }
  // Looked up once the flight is registered: a compile of the key that finished between the
  // caller's own lookup and here is found, not repeated.
  if (std::optional<std::string> found = request.find ? request.find() : std::nullopt; found) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.coalesced;
      flights_.erase(request.key);
    }
    {
      std::lock_guard<std::mutex> lock(flight->mu);
      flight->result = *found;
    }
    flight->done_cv.notify_all();
    return CompileOutcome{std::move(*found), true, elapsed()};
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    const size_t workers = std::max<size_t>(options_.workers, 1);
    ++stats_.waiting;
    slot_free_.wait(lock, [&] { return stats_.running < workers; });
    --stats_.waiting;
    ++stats_.running;
  }
  Result<std::string> result = RunJob(request);
  // Published while the flight is still registered: a request for this key arrives either
  // before this point (and joins the flight) or after (and finds what was published).
  if (result && request.publish) request.publish(*result);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --stats_.running;
    ++(result ? stats_.compiles : stats_.failures);
    flights_.erase(request.key);
  }
  slot_free_.notify_one();
  {
    std::lock_guard<std::mutex> lock(flight->mu);
    flight->result = result;
  }
  flight->done_cv.notify_all();
  if (!result) return Error(result.error());
  return CompileOutcome{std::move(*result), false, elapsed()};
}

Result<std::string> WorkerPool::RunJob(const CompileRequest& request) {
  const fs::path root = options_.temp_root.empty() ? DefaultTempRoot() : options_.temp_root;
  HLOCACHE_ASSIGN_OR_RETURN(TempDir job, TempDir::Make(root, "hlocache-job-"));
  {
    std::ofstream out(job.path() / "module.hlo", std::ios::binary);
    out.write(request.hlo_text.data(), static_cast<std::streamsize>(request.hlo_text.size()));
    out.close();
    if (!out) return Error(IoError("cannot write the module into " + job.path().string()));
  }
  std::vector<std::string> args = {"compile-worker",
                                   "--input",
                                   "module.hlo",
                                   "--output",
                                   "artifact.bin",
                                   "--key",
                                   request.key,
                                   "--name",
                                   request.name.empty() ? "module.hlo" : request.name,
                                   "--temp-root",
                                   job.path().string(),
                                   "--memory-limit",
                                   std::to_string(options_.memory_limit_bytes)};
  if (!request.target.empty()) {
    args.push_back("--target");
    args.push_back(request.target);
  }
  args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
  ProcessLimits limits;
  limits.timeout = options_.timeout;
  limits.cpu_seconds = options_.cpu_seconds_limit;
  HLOCACHE_ASSIGN_OR_RETURN(ProcessOutcome outcome,
                            RunProcess(options_.worker_binary, args, job.path(), limits,
                                       "worker.log", options_.on_worker_started));
  if (outcome.timed_out) {
    return Error(
        DeadlineExceeded("the compile ran past its time limit of " +
                         std::to_string(std::chrono::duration<double>(options_.timeout).count()) +
                         " s; its worker and compilers were killed"));
  }
  if (outcome.signal != 0) {
    return Error(Internal("the compile worker was killed by signal " +
                          std::to_string(outcome.signal) + " (" + strsignal(outcome.signal) + ")"));
  }
  if (outcome.exit_code != 0) return Error(ParseWorkerError(outcome.output));
  std::string artifact = ReadWholeFile(job.path() / "artifact.bin").value_or("");
  if (auto decoded = DecodeArtifact(artifact); !decoded) {
    return Error(
        DataLoss("the compile worker returned a bad artifact: " + decoded.error().message()));
  }
  return artifact;
}

}  // namespace hlocache::compiler
