#include "server/metrics.h"

#include <nlohmann/json.hpp>

namespace hlocache::server {
namespace {

void Line(std::string& out, std::string_view name, std::string_view type, std::string_view help,
          double value) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += ' ';
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  out += buf;
  out += '\n';
}

double Seconds(const std::atomic<uint64_t>& micros) {
  return static_cast<double>(micros.load(std::memory_order_relaxed)) / 1e6;
}

}  // namespace

std::string_view RouteName(Route route) {
  switch (route) {
    case Route::kArtifactGet:
      return "artifact_get";
    case Route::kArtifactHead:
      return "artifact_head";
    case Route::kArtifactPut:
      return "artifact_put";
    case Route::kArtifactDelete:
      return "artifact_delete";
    case Route::kCompile:
      return "compile";
    case Route::kKeys:
      return "keys";
    case Route::kStats:
      return "stats";
    case Route::kMetrics:
      return "metrics";
    case Route::kHealth:
      return "healthz";
    case Route::kFiles:
      return "files";
    case Route::kOther:
      return "other";
  }
  return "other";
}

Route RouteOf(std::string_view method, std::string_view path) {
  if (path.starts_with("/v1/artifacts/")) {
    if (method == "GET") return Route::kArtifactGet;
    if (method == "HEAD") return Route::kArtifactHead;
    if (method == "PUT") return Route::kArtifactPut;
    if (method == "DELETE") return Route::kArtifactDelete;
    return Route::kOther;
  }
  if (path == "/v1/compile") return Route::kCompile;
  if (path == "/v1/keys") return Route::kKeys;
  if (path == "/v1/stats") return Route::kStats;
  if (path == "/metrics") return Route::kMetrics;
  if (path == "/healthz") return Route::kHealth;
  if (path.starts_with("/v1/files/")) return Route::kFiles;
  return Route::kOther;
}

void Metrics::CountFile(std::string_view file_namespace, FileOutcome outcome) {
  std::lock_guard<std::mutex> lock(files_mu_);
  auto it = files_.find(file_namespace);
  if (it == files_.end()) {
    it = files_.size() < kMostNamespaces
             ? files_.emplace(std::string(file_namespace), std::array<uint64_t, 3>{}).first
             : files_.try_emplace("other").first;
  }
  ++it->second[static_cast<size_t>(outcome)];
}

void Metrics::CountRequest(Route route, int http_status) {
  if (http_status < kFirstStatus || http_status >= kFirstStatus + kStatusCount) return;
  requests_[static_cast<size_t>(route)][static_cast<size_t>(http_status - kFirstStatus)].fetch_add(
      1, std::memory_order_relaxed);
}

std::string Metrics::RenderPrometheus(const Sources& sources) const {
  const cache::StoreStats* store = sources.store;
  const compiler::WorkerPoolStats& pool = sources.pool;
  const UpstreamStats* upstream = sources.upstream;
  std::string out;
  out.reserve(4096);
  out +=
      "# HELP hlocache_http_requests_total HTTP requests answered, by route and status.\n"
      "# TYPE hlocache_http_requests_total counter\n";
  for (size_t r = 0; r < kRouteCount; ++r) {
    for (int s = 0; s < kStatusCount; ++s) {
      const uint64_t n = requests_[r][static_cast<size_t>(s)].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out += "hlocache_http_requests_total{route=\"";
      out += RouteName(static_cast<Route>(r));
      out += "\",status=\"" + std::to_string(s + kFirstStatus) + "\"} " + std::to_string(n) + "\n";
    }
  }
  auto counter = [&](std::string_view name, std::string_view help, double v) {
    Line(out, name, "counter", help, v);
  };
  auto gauge = [&](std::string_view name, std::string_view help, double v) {
    Line(out, name, "gauge", help, v);
  };
  auto load = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  counter("hlocache_hits_total", "Artifacts served from the store.", load(hits));
  counter("hlocache_memory_tier_hits_total", "Of the hits, those sent from the memory tier.",
          load(memory_hits));
  counter("hlocache_misses_total", "Lookups that found nothing stored.", load(misses));
  counter("hlocache_uploads_total", "Uploads that stored a new artifact.", load(uploads));
  counter("hlocache_uploads_rejected_total", "Uploads refused (bad key, container or size).",
          load(rejected));
  counter("hlocache_requests_cut_short_total",
          "Requests the connection failed during: a deadline passed, or the client went away.",
          load(cut_short));
  counter("hlocache_bytes_in_total", "Artifact and HLO bytes received.", load(bytes_in));
  counter("hlocache_bytes_out_total", "Artifact bytes sent.", load(bytes_out));
  counter("hlocache_compiles_total", "Compiles that produced an artifact.",
          static_cast<double>(pool.compiles));
  counter("hlocache_compile_failures_total", "Compiles that failed.",
          static_cast<double>(pool.failures));
  counter("hlocache_compiles_coalesced_total", "Compile requests served by another's compile.",
          static_cast<double>(pool.coalesced));
  counter("hlocache_compiles_rejected_total", "Compile requests refused: queue full.",
          static_cast<double>(pool.rejected));
  counter("hlocache_compile_seconds_total", "Wall time spent compiling.", Seconds(compile_micros));
  counter("hlocache_compile_seconds_saved_total",
          "Compile time of the artifacts served as hits (what the cache saved).",
          Seconds(compile_saved_micros));
  counter("hlocache_store_errors_total", "Store failures answered with a 5xx.", load(store_errors));
  gauge("hlocache_requests_in_flight", "Requests being handled now.",
        static_cast<double>(in_flight.load(std::memory_order_acquire)));
  gauge("hlocache_compiles_running", "Compiles running now.", static_cast<double>(pool.running));
  gauge("hlocache_compiles_waiting", "Compiles waiting for a worker.",
        static_cast<double>(pool.waiting));
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    if (!files_.empty()) {
      out +=
          "# HELP hlocache_file_requests_total File artifacts served (hit), not found (miss) "
          "and stored (write), by namespace.\n"
          "# TYPE hlocache_file_requests_total counter\n";
      for (const auto& [name, counts] : files_) {
        static constexpr const char* kOutcomes[] = {"hit", "miss", "write"};
        for (size_t i = 0; i < 3; ++i) {
          out += "hlocache_file_requests_total{namespace=\"" + name + "\",outcome=\"" +
                 kOutcomes[i] + "\"} " + std::to_string(counts[i]) + "\n";
        }
      }
    }
  }
  if (store != nullptr) {
    gauge("hlocache_store_entries", "Artifacts in the store.", static_cast<double>(store->entries));
    gauge("hlocache_store_bytes", "Bytes of the artifacts in the store.",
          static_cast<double>(store->bytes));
    gauge("hlocache_store_max_bytes", "The store's size cap (0: none).",
          static_cast<double>(store->max_bytes));
    counter("hlocache_store_evictions_total", "Entries evicted (store lifetime).",
            static_cast<double>(store->evictions));
    counter("hlocache_store_quarantined_total", "Corrupt entries removed (store lifetime).",
            static_cast<double>(store->quarantined));
  }
  if (const MemoryTierStats* tier = sources.memory_tier; tier != nullptr) {
    gauge("hlocache_memory_tier_bytes", "Bytes of the bodies the memory tier holds.",
          static_cast<double>(tier->bytes));
    gauge("hlocache_memory_tier_bodies", "Bodies the memory tier holds.",
          static_cast<double>(tier->bodies));
    gauge("hlocache_memory_tier_capacity_bytes", "The memory tier's budget (--memory-tier).",
          static_cast<double>(tier->capacity_bytes));
  }
  if (upstream != nullptr) {
    auto n = [](uint64_t v) { return static_cast<double>(v); };
    counter("hlocache_upstream_fetches_total", "Artifacts fetched from the upstream and kept.",
            n(upstream->fetches));
    counter("hlocache_upstream_fetch_misses_total", "Fetches the upstream did not have.",
            n(upstream->fetch_misses));
    counter("hlocache_upstream_compiles_total", "Compiles the upstream answered.",
            n(upstream->compiles));
    counter("hlocache_upstream_uploads_total", "Artifacts uploaded to the upstream.",
            n(upstream->uploads));
    counter("hlocache_upstream_uploads_refused_total", "Uploads the upstream refused (4xx).",
            n(upstream->upload_refused));
    counter("hlocache_upstream_failures_total",
            "Requests that could not reach the upstream or that it refused (not 404).",
            n(upstream->failures));
    counter("hlocache_upstream_skipped_total",
            "Requests not sent while the upstream was backing off.", n(upstream->skipped));
    gauge("hlocache_upstream_pending_uploads", "Uploads waiting for the upstream.",
          n(upstream->pending_uploads));
    gauge("hlocache_upstream_up", "1 when the last request reached the upstream.",
          upstream->up ? 1 : 0);
    const storage::RequestStats& r = upstream->requests;
    if (r.kept) {
      counter("hlocache_upstream_requests_total", "Requests sent to the bucket, retries included.",
              n(r.requests));
      counter("hlocache_upstream_request_retries_total",
              "Requests sent again after no answer or a 5xx.", n(r.retries));
      counter("hlocache_upstream_request_seconds_total", "Time from sending to the whole answer.",
              static_cast<double>(r.latency_micros) / 1e6);
      counter("hlocache_upstream_bytes_sent_total", "Request bodies sent to the bucket.",
              n(r.bytes_sent));
      counter("hlocache_upstream_bytes_received_total", "Answer bodies received from the bucket.",
              n(r.bytes_received));
      out +=
          "# HELP hlocache_upstream_request_errors_total Bucket requests that failed, by kind.\n"
          "# TYPE hlocache_upstream_request_errors_total counter\n";
      const std::pair<const char*, uint64_t> kinds[] = {{"unavailable", r.errors_unavailable},
                                                        {"throttled", r.throttled},
                                                        {"denied", r.errors_denied},
                                                        {"refused", r.errors_refused}};
      for (const auto& [kind, count] : kinds) {
        out += std::string("hlocache_upstream_request_errors_total{kind=\"") + kind + "\"} " +
               std::to_string(count) + "\n";
      }
    }
  }
  return out;
}

std::string Metrics::RenderStatsJson(const Sources& sources) const {
  const cache::StoreStats* store = sources.store;
  const compiler::WorkerPoolStats& pool = sources.pool;
  const UpstreamStats* upstream = sources.upstream;
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  nlohmann::json j;
  j["hits"] = load(hits);
  j["memory_tier_hits"] = load(memory_hits);
  j["misses"] = load(misses);
  j["puts"] = load(uploads);
  j["rejected"] = load(rejected);
  j["requests_cut_short"] = load(cut_short);
  j["bytes_in"] = load(bytes_in);
  j["bytes_out"] = load(bytes_out);
  j["compiles"] = pool.compiles;
  j["requests_in_flight"] = in_flight.load(std::memory_order_acquire);
  j["compiles_running"] = pool.running;
  j["compiles_waiting"] = pool.waiting;
  j["compile_failures"] = pool.failures;
  j["coalesced"] = pool.coalesced;
  j["compile_queue_rejected"] = pool.rejected;
  j["compile_seconds"] = Seconds(compile_micros);
  j["compile_seconds_saved"] = Seconds(compile_saved_micros);
  if (store != nullptr) {
    j["entries"] = store->entries;
    j["bytes"] = store->bytes;
    j["max_bytes"] = store->max_bytes;
    j["evictions"] = store->evictions;
    j["quarantined"] = store->quarantined;
    j["store_lifetime"] = {{"hits", store->hits}, {"misses", store->misses}, {"puts", store->puts}};
  }
  if (const MemoryTierStats* tier = sources.memory_tier; tier != nullptr) {
    j["memory_tier"] = {
        {"bytes", tier->bytes}, {"bodies", tier->bodies}, {"capacity_bytes", tier->capacity_bytes}};
  }
  {
    std::lock_guard<std::mutex> lock(files_mu_);
    for (const auto& [name, counts] : files_) {
      j["files"][name] = {{"hits", counts[0]}, {"misses", counts[1]}, {"writes", counts[2]}};
    }
  }
  if (upstream != nullptr) {
    j["upstream"] = {{"up", upstream->up},
                     {"fetches", upstream->fetches},
                     {"fetch_misses", upstream->fetch_misses},
                     {"compiles", upstream->compiles},
                     {"uploads", upstream->uploads},
                     {"uploads_refused", upstream->upload_refused},
                     {"failures", upstream->failures},
                     {"skipped", upstream->skipped},
                     {"pending_uploads", upstream->pending_uploads}};
    nlohmann::json parts = nlohmann::json::array();
    for (const UpstreamPartStats& part : upstream->parts) {
      parts.push_back({{"url", part.url},
                       {"up", part.up},
                       {"failures", part.failures},
                       {"skipped", part.skipped}});
    }
    j["upstream"]["parts"] = std::move(parts);
    const storage::RequestStats& r = upstream->requests;
    if (r.kept) {
      j["upstream"]["requests"] = {{"sent", r.requests},
                                   {"retries", r.retries},
                                   {"seconds", static_cast<double>(r.latency_micros) / 1e6},
                                   {"bytes_sent", r.bytes_sent},
                                   {"bytes_received", r.bytes_received},
                                   {"errors_unavailable", r.errors_unavailable},
                                   {"throttled", r.throttled},
                                   {"errors_denied", r.errors_denied},
                                   {"errors_refused", r.errors_refused}};
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace hlocache::server
