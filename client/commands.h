// The `hlocache` subcommands, as functions from parsed arguments to an exit status.
//
// Exit status: 0 success, 1 a failure the command explains on stderr, 2 bad usage (reported by
// main's flag parser before these run). Output goes to the given streams so tests can drive the
// commands in-process.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "storage/s3_backend.h"

namespace hlocache::client {

// GET URL/healthz: 0 when it answers 200, else 1 with the reason on `err`.
int RunHealth(const std::string& url, const std::string& ca_cert, std::ostream& out,
              std::ostream& err);

// `hlocache stats --dir DIR`: entries, bytes and lifetime counters of a local store (opened
// read-only).
int RunStats(const std::string& dir, std::ostream& out, std::ostream& err);

// `hlocache verify --dir DIR`: reads and verifies every entry, quarantining corrupt ones and
// removing orphan chunks; exit 1 when anything was corrupt.
int RunVerify(const std::string& dir, std::ostream& out, std::ostream& err);

// `hlocache gc --dir DIR --max-size SIZE`: evicts least-recently-used entries down to SIZE.
int RunGc(const std::string& dir, const std::string& max_size, std::ostream& out,
          std::ostream& err);

struct BucketGcSettings {
  std::string bucket;  // s3://BUCKET[/PREFIX]
  std::string max_size;
  // An hour plus the marking interval (storage/s3_backend.h): what was served within the last
  // hour has a mark at most that old.
  int64_t keep_used_within_seconds = (std::chrono::hours(1) + storage::kMarkInterval).count();
  bool dry_run = false;
};

// `hlocache gc --cache s3://BUCKET[/PREFIX] --max-size SIZE`: deletes the bucket's least
// recently used artifacts (by upload and use marks) until what is left is at most SIZE, never
// one used within `keep_used_within_seconds`. Exit 1 with one line when the bucket cannot be
// listed or an entry cannot be deleted (what was deleted stays deleted).
int RunBucketGc(const BucketGcSettings& settings, std::ostream& out, std::ostream& err);

struct CompileSettings {
  std::string target;  // Empty: this host's best CPU level.
  std::string output;  // Empty: KEY.hloart in the current folder.
  std::string cxx = "c++";
  double timeout_seconds = 600;
  // A cache spec (client/cache.h): look the module up there first, compile on a miss (on a
  // server that can, else here) and write the result back. Empty: always compile here.
  std::string cache;
};

// `hlocache compile FILE`: keys the module, compiles it in a worker process and writes the
// artifact; prints "KEY  PATH  BYTES bytes  SECONDS s".
int RunCompile(const std::string& file, const CompileSettings& settings, std::ostream& out,
               std::ostream& err);

struct RunSettings {
  std::string inputs = "random";  // random | zeros
  uint64_t seed = 1;
  bool check = false;
  std::string artifact;  // Run this artifact instead of compiling FILE.
};

// `hlocache run FILE`: compiles (or loads --artifact), runs on generated inputs, prints each
// result leaf's shape and XXH3-128 and the run time; --check compares with the interpreter
// (integers exact, floats within 1e-5 relative) and exits 1 on a mismatch.
int RunRun(const std::string& file, const CompileSettings& compile, const RunSettings& settings,
           std::ostream& out, std::ostream& err);

struct WorkerSettings {
  std::string input, output, key, name, target, temp_root;
  std::string cxx = "c++";
  uint64_t memory_limit_bytes = 0;
};

// `hlocache compile-worker`: the child process of compiler::WorkerPool. Reads the module from
// --input, writes the artifact to --output; on failure prints one line "<code>: <message>".
int RunCompileWorker(const WorkerSettings& settings, std::ostream& err);

struct PrewarmSettings {
  std::string cache;  // The spec to fill.
  std::string target;
  std::string cxx = "c++";
  std::string worker_binary;  // `hlocache` itself, for compile workers.
  int jobs = 2;
};

// `hlocache prewarm PATH... --cache SPEC`: compiles (or finds) every .hlo under the paths. A
// progress bar on a terminal, a line per module otherwise, then a table: compiled, already
// cached, unsupported, failed, seconds. Exit 1 if any module failed (unsupported ones do not
// count: they are reported, and a fleet compiles them itself).
int RunPrewarm(const std::vector<std::string>& paths, const PrewarmSettings& settings,
               std::ostream& out, std::ostream& err);

// `hlocache export --cache DIR -o BUNDLE`: every entry of a local store in one zstd-compressed
// bundle with a manifest (schema/bundle.md).
int RunExport(const std::string& dir, const std::string& bundle, std::ostream& out,
              std::ostream& err);

// `hlocache import BUNDLE --cache SPEC`: checks every entry (manifest checksum, container, key)
// and stores the good ones in the cache's writable tiers; exit 1 if any was bad or not stored.
int RunImport(const std::string& bundle, const std::string& spec, std::ostream& out,
              std::ostream& err);

}  // namespace hlocache::client
