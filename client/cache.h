// The client cache: what a training process calls to get an executable for an HLO module.
//
//   hlocache::initialize_cache("/var/cache/hlo,http://cache.internal:7070");
//   auto exe = hlocache::global_cache()->GetOrCompile(hlo_text);
//
// A spec is a comma-separated list of tiers tried in order after an in-process memory LRU:
// directories (a store opened here, or reached through the server that owns it) and
// http(s):// servers. On a miss the module is compiled by the first server that can build its
// target, or else here; the result is then written back to the tiers that missed, in the
// background, unless the cache is read-only.
//
// Failure policy: the cache is never the reason a caller fails. A tier that errs (connection
// refused, timeout, 5xx, a store that cannot be opened) is skipped, and a server that failed
// rests: it is not asked again for `backoff.min_backoff`, doubled with every failure in a row up
// to `backoff.max_backoff`. Every artifact is verified (checksum, key, loadable) whatever
// tier it came from; a bad one is dropped and rebuilt. The only errors GetOrCompile returns are
// the module's own: it does not parse, or no compiler (here or remote) can build it.
//
// Thread safety: a Cache may be used from any number of threads; concurrent requests for one
// key in one process share one lookup and compile.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/backoff.h"
#include "common/status.h"
#include "compiler/artifact/loader.h"

namespace hlocache::hlo {
class Module;
}

namespace hlocache::client {

enum class Source { kMemory, kLocal, kRemote, kCompiledHere, kCompiledByServer };
std::string_view SourceName(Source source);

struct CacheOptions {
  // Never write to any tier (the server may still compile and keep what it builds).
  bool read_only = false;
  std::string token;    // Bearer token for servers.
  std::string ca_cert;  // PEM CA for https servers (an internal CA); empty: the system's.
  uint64_t memory_bytes = uint64_t{256} << 20;  // In-process LRU of loaded executables; 0: off.
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds compile_timeout{600000};  // A server's compile, or one here.
  BackoffOptions backoff;  // A failed server rests 1 s, doubling to 30 s (common/backoff.h).
  double min_compile_seconds = 0;  // Compiles faster than this are not written back.
  std::string cxx = "c++";
  // The `hlocache` executable to compile in (`hlocache compile-worker`, its own process with
  // limits). Empty: compile in this process (the C++ compiler still runs as a child).
  std::filesystem::path worker_binary;
  size_t compile_workers = 2;  // Compiles at once in this process (with worker_binary).
  // Where notes go (a tier skipped, a corrupt artifact dropped). Default: stderr.
  std::function<void(std::string_view)> log;

  // Defaults, with HLOCACHE_READONLY=1, HLOCACHE_TOKEN and HLOCACHE_CA_CERT applied.
  static CacheOptions FromEnvironment();
};

struct Executable {
  std::string key;
  // Null when the artifact's target does not run on this host (prewarming for other machines):
  // then only its container was verified.
  std::shared_ptr<const compiler::LoadedExecutable> executable;
  std::shared_ptr<const std::string> artifact;  // The verified container bytes it was loaded from.
  Source source = Source::kCompiledHere;
  std::string tier;            // The tier it came from or the server that compiled it.
  double lookup_seconds = 0;   // In tiers, failures included.
  double compile_seconds = 0;  // Compiling here, or waiting for a server's compile.
  double total_seconds = 0;
};

struct CacheStats {
  // requests: every GetOrCompile, whether or not its text parses and keys.
  uint64_t requests = 0, memory_hits = 0, tier_hits = 0, server_compiles = 0, local_compiles = 0;
  uint64_t corrupt_dropped = 0, tier_errors = 0, uploads = 0, upload_failures = 0;
  // Memory hits of a text asked for before, answered without parsing or keying it.
  uint64_t keys_memoized = 0;
};

class Cache {
 public:
  // kInvalidArgument for a malformed spec. Tiers that cannot be reached are noted and skipped.
  static Result<std::unique_ptr<Cache>> Open(const std::string& spec, CacheOptions options = {});
  virtual ~Cache() = default;  // Waits for the uploads already queued.

  // `target` empty: this host's best CPU level. The key of a text is remembered by an XXH3 of
  // the exact text and the target: a text asked for again whose executable is in memory costs
  // one pass of XXH3, no parse and no keying.
  virtual Result<Executable> GetOrCompile(std::string_view hlo_text,
                                          std::string_view target = "") = 0;
  // The same for a module the caller has already parsed (its source text is what a server is
  // sent), so that a caller who needs the module too parses it once.
  virtual Result<Executable> GetOrCompile(const hlo::Module& module,
                                          std::string_view target = "") = 0;
  // Stores a ready artifact under `key` in every writable tier, now (for imports). Verifies it
  // first (container, checksum, key). kInvalidArgument or kDataLoss for a bad artifact;
  // kPermissionDenied for a read-only cache; kUnavailable when no tier took it.
  virtual Status Put(std::string_view key, std::string_view artifact) = 0;
  // Returns once every upload queued so far has been attempted.
  virtual void Flush() = 0;
  virtual CacheStats stats() const = 0;
  virtual const std::string& spec() const = 0;
};

// The tiers of a spec, in order: "a, b,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitCacheSpec(const std::string& spec);

// The process-wide cache. A second call with the same spec is a no-op; with another spec,
// kFailedPrecondition. An empty spec means $HLOCACHE.
Status initialize_cache(const std::string& spec,
                        CacheOptions options = CacheOptions::FromEnvironment());
// Null before initialize_cache.
Cache* global_cache();

}  // namespace hlocache::client

namespace hlocache {
using client::Cache;
using client::global_cache;
using client::initialize_cache;
}  // namespace hlocache
