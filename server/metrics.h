// The server's counters, rendered as /metrics (Prometheus text format 0.0.4) and /v1/stats.
//
// Counters are relaxed atomics: a request adds to them without a lock, and a scrape reads a
// moment's values that need not be mutually consistent. They count since the server started;
// the store's lifetime counters (which survive restarts) are reported beside them.
//
// Thread safety: every member may be used from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "compiler/worker_pool.h"
#include "server/memory_tier.h"
#include "server/upstream.h"

namespace hlocache::server {

enum class Route {
  kArtifactGet,
  kArtifactHead,
  kArtifactPut,
  kArtifactDelete,
  kCompile,
  kKeys,
  kStats,
  kMetrics,
  kHealth,
  kFiles,
  kOther,
};
inline constexpr size_t kRouteCount = 11;

std::string_view RouteName(Route route);
// The route a request is counted under, from its method and path alone.
Route RouteOf(std::string_view method, std::string_view path);

// What happened to a file artifact (schema/file-artifacts.md) asked for or sent.
enum class FileOutcome { kHit, kMiss, kWrite };

class Metrics {
 public:
  void CountRequest(Route route, int http_status);
  // Counts a file artifact served (kHit), asked for and not found (kMiss: only when the client
  // named its namespace, X-Hlocache-Namespace), or stored by an upload (kWrite). Namespaces
  // beyond the first 256 are counted as "other".
  void CountFile(std::string_view file_namespace, FileOutcome outcome);

  std::atomic<uint64_t> hits{0};            // Artifacts served from the store (GET and compile).
  std::atomic<uint64_t> memory_hits{0};     // Of the hits, those sent from the memory tier.
  std::atomic<uint64_t> misses{0};          // GETs and compiles that found nothing stored.
  std::atomic<uint64_t> uploads{0};         // PUTs that stored a new artifact.
  std::atomic<uint64_t> rejected{0};        // Uploads refused: bad key, bad container, too large.
  std::atomic<uint64_t> bytes_in{0};        // Artifact and HLO bytes received.
  std::atomic<uint64_t> bytes_out{0};       // Artifact bytes sent.
  std::atomic<uint64_t> compile_micros{0};  // Wall time of compiles run here.
  std::atomic<uint64_t> compile_saved_micros{0};  // Compile time of the artifacts served as hits.
  std::atomic<uint64_t> store_errors{0};          // Store failures answered with 5xx.
  std::atomic<uint64_t> cut_short{0};  // Requests the connection failed during (timeouts, resets).
  std::atomic<int64_t> in_flight{0};   // Routed, and not yet answered, counted and logged.

  // What the renderings report beside the counters, read by the caller at one moment.
  struct Sources {
    const cache::StoreStats* store = nullptr;  // Null when its statistics could not be read.
    compiler::WorkerPoolStats pool;
    const UpstreamStats* upstream = nullptr;       // Null for a server without one.
    const MemoryTierStats* memory_tier = nullptr;  // Null with `--memory-tier 0`.
  };
  std::string RenderPrometheus(const Sources& sources) const;
  std::string RenderStatsJson(const Sources& sources) const;

 private:
  static constexpr size_t kMostNamespaces = 256;
  mutable std::mutex files_mu_;  // Guards files_ (not the hot path: file requests only).
  std::map<std::string, std::array<uint64_t, 3>, std::less<>> files_;
  static constexpr int kFirstStatus = 100;
  static constexpr int kStatusCount = 500;  // 100..599
  std::array<std::array<std::atomic<uint64_t>, kStatusCount>, kRouteCount> requests_{};
};

}  // namespace hlocache::server
