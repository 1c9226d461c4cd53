#include "server/upstream.h"

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "cache/key.h"
#include "common/http_client.h"
#include "common/http_get.h"
#include "common/single_flight.h"
#include "server/verified_put.h"
#include "storage/availability.h"
#include "storage/http_backend.h"
#include "storage/s3_backend.h"

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;

class UpstreamImpl final : public Upstream {
 public:
  UpstreamImpl(UpstreamOptions options, cache::Store& store,
               std::unique_ptr<storage::Backend> origin, const HttpGetOptions& get_options)
      : options_(std::move(options)),
        store_(store),
        origin_(std::move(origin)),
        getters_(options_.url, get_options),
        availability_(
            "upstream " + options_.url, options_.backoff,
            [](std::string_view line) {
              std::fprintf(stderr, "hlocache: %.*s\n", static_cast<int>(line.size()), line.data());
            },
            // The uploader catches up as soon as the origin is back.
            [this] { queue_changed_.notify_all(); }) {
    LoadPending();
    uploader_ = std::thread([this] { RunUploader(); });
  }

  ~UpstreamImpl() override {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      stopping_ = true;
    }
    queue_changed_.notify_all();
    uploader_.join();
  }

  const std::string& url() const override { return options_.url; }

  Result<bool> Fetch(std::string_view key) override {
    return fetches_.Do(std::string(key), [&] { return FetchNow(key); });
  }

  Result<std::optional<uint64_t>> Head(std::string_view key) override {
    if (!availability_.Admit()) return Error(availability_.Resting());
    return availability_.Record(origin_->Head(key));
  }

  Result<std::vector<FileEntry>> ListFiles(std::string_view file_namespace, std::string_view prefix,
                                           size_t limit) override {
    if (!options_.url.starts_with("http")) {
      return Error(Unavailable("upstream " + options_.url + " lists no files (a bucket)"));
    }
    if (!availability_.Admit()) return Error(availability_.Resting());
    httplib::Params params{{"prefix", std::string(prefix)}};
    if (limit != 0) params.emplace("limit", std::to_string(limit));
    const std::string path =
        httplib::append_query_params("/v1/files/" + std::string(file_namespace), params);
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->GetWhole(path);
    if (!r) {
      return Error(availability_.Record(Unavailable(
          "upstream " + options_.url + ": GET /v1/files failed: " + r.error().message())));
    }
    getters_.GiveBack(std::move(getter));
    if (r->first != 200) {
      httplib::Response reply;
      reply.status = r->first;
      reply.body = std::move(r->second);
      const std::string why =
          "upstream " + options_.url + ": GET /v1/files answered " + DescribeReply(reply);
      // Counted; a 5xx rests the origin as any request's does.
      (void)availability_.Record(reply.status >= 500 ? Unavailable(why) : InvalidArgument(why));
      return Error(Unavailable(why));
    }
    (void)availability_.Record(Status::Ok());
    auto parsed = ParseFileListing(r->second);
    if (!parsed) {
      return Error(Unavailable("upstream " + options_.url + ": " + parsed.error().message()));
    }
    return parsed;
  }

  Result<UpstreamCompile> Compile(std::string_view key, std::string_view hlo_text,
                                  std::string_view target) override {
    bool shared = false;
    auto outcome = compiles_.Do(
        std::string(key), [&] { return CompileNow(key, hlo_text, target); }, &shared);
    if (outcome) outcome->shared = shared;
    return outcome;
  }

  void QueueUpload(std::string_view key) override {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (!queued_.emplace(key).second) return;
      queue_.emplace_back(key);
    }
    queue_changed_.notify_all();
  }

  UpstreamStats stats() const override {
    UpstreamStats s;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      s = stats_;
    }
    const storage::AvailabilityStats a = availability_.stats();
    s.failures = a.failures;
    s.skipped = a.skipped;
    s.up = a.up;
    s.requests = origin_->request_stats();
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      s.pending_uploads = queue_.size();
    }
    return s;
  }

 private:
  void Count(uint64_t UpstreamStats::*counter) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++(stats_.*counter);
  }

  Result<bool> FetchNow(std::string_view key) {
    if (!availability_.Admit()) return Error(availability_.Resting());
    // The body goes through the same checks as an upload, into the store as it arrives.
    std::unique_ptr<VerifiedPut> put;
    storage::ReadSink sink;
    sink.start = [&](uint64_t size) {
      put = std::make_unique<VerifiedPut>(store_, std::string(key), size, options_.strict_checks);
      return true;
    };
    sink.chunk = [&](std::string_view bytes) { return put->Receive(bytes); };
    HLOCACHE_ASSIGN_OR_RETURN(bool found, availability_.Record(origin_->Read(key, sink)));
    if (!found) {
      Count(&UpstreamStats::fetch_misses);
      return false;
    }
    auto stored = put->Finish();
    if (!stored) {
      return Error(Status(stored.error().code(), "artifact from upstream " + options_.url + ": " +
                                                     stored.error().message()));
    }
    Count(&UpstreamStats::fetches);
    return true;
  }

  Result<UpstreamCompile> CompileNow(std::string_view key, std::string_view hlo_text,
                                     std::string_view target) {
    if (!origin_->CanCompile(target)) {
      // A bucket: what it holds is fetched (checked, and kept here); what it lacks this host
      // compiles, and its upload queue puts the artifact in the bucket.
      auto fetched = FetchNow(key);
      if (fetched && *fetched) {
        auto stored = store_.Get(key);
        if (stored && *stored) {
          UpstreamCompile out;
          out.origin_cache = "hit";
          out.artifact = std::move(**stored);
          return out;
        }
      }
      return Error(Unavailable(
          "upstream " + options_.url +
          (fetched ? " does not hold " + std::string(key) : ": " + fetched.error().message())));
    }
    if (!availability_.Admit()) return Error(availability_.Resting());
    auto r = origin_->Compile(hlo_text, target);
    if (!r) {
      const StatusCode code = r.error().code();
      if (code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition) {
        // The origin's verdict on the module: it is up, and compiling here would fail alike.
        (void)availability_.Record(Status::Ok());
        return Error(Status(code, "upstream " + r.error().message()));
      }
      // Unreachable, busy, read-only or refusing this host's token: compiling here is right.
      return Error(Unavailable(availability_.Record(Status(r.error())).message()));
    }
    (void)availability_.Record(Status::Ok());
    if (r->key != key) {
      // Another compiler id on the origin: its executable is not the one this key names.
      return Error(Unavailable("upstream " + options_.url + " keys this module as " + r->key +
                               ", not " + std::string(key) + " (another compiler)"));
    }
    VerifiedPut put(store_, std::string(key), r->artifact.size(), options_.strict_checks);
    put.Receive(r->artifact);
    auto stored = put.Finish();
    if (!stored) {
      if (stored.error().code() == StatusCode::kInvalidArgument) {
        return Error(
            Unavailable("upstream " + options_.url +
                        " sent an artifact that fails its check: " + stored.error().message()));
      }
      // It passed every check; only keeping a copy here failed (a full disk, say).
      std::fprintf(stderr, "hlocache: cannot store %s from upstream: %s\n",
                   std::string(key).c_str(), stored.error().ToString().c_str());
    }
    Count(&UpstreamStats::compiles);
    UpstreamCompile out;
    out.origin_cache = r->cache_status;
    out.artifact = std::move(r->artifact);
    return out;
  }

  enum class UploadResult { kDone, kRetry };

  UploadResult UploadNow(const std::string& key) {
    auto opened = store_.OpenReader(key);
    if (!opened || !*opened) return UploadResult::kDone;  // Gone (evicted) or unreadable.
    std::unique_ptr<cache::ArtifactReader> reader = std::move(*opened);
    const storage::ChunkSource next = [&]() -> Result<std::string_view> {
      HLOCACHE_ASSIGN_OR_RETURN(std::span<const char> chunk, reader->Next());
      return std::string_view(chunk.data(), chunk.size());
    };
    const Status sent = origin_->Write(key, reader->info().size, next, reader->info().artifact);
    if (sent.ok()) {
      (void)availability_.Record(sent);
      Count(&UpstreamStats::uploads);
      return UploadResult::kDone;
    }
    if (sent.code() == StatusCode::kDataLoss) {
      // The local copy failed its check while it was read (and is quarantined): nothing to send.
      std::fprintf(stderr, "hlocache: upload of %s to upstream %s dropped: %s\n", key.c_str(),
                   options_.url.c_str(), sent.message().c_str());
      return UploadResult::kDone;
    }
    if (availability_.Record(sent).code() == StatusCode::kUnavailable) {
      return UploadResult::kRetry;  // The origin rests; the key stays queued.
    }
    Count(&UpstreamStats::upload_refused);
    std::fprintf(stderr, "hlocache: upstream %s refused %s: %s\n", options_.url.c_str(),
                 key.c_str(), sent.message().c_str());
    return UploadResult::kDone;
  }

  // The uploads a previous run left queued.
  void LoadPending() {
    if (options_.pending_file.empty()) return;
    std::ifstream in(options_.pending_file);
    std::string key;
    while (std::getline(in, key)) {
      if (cache::IsWellFormedKey(key) && queued_.insert(key).second) queue_.push_back(key);
    }
    if (!queue_.empty()) {
      std::fprintf(stderr, "hlocache: %zu uploads to upstream %s queued from the last run\n",
                   queue_.size(), options_.url.c_str());
    }
  }

  // Called with queue_mu_ held, once the uploader has stopped.
  void SavePending() {
    if (options_.pending_file.empty()) {
      if (!queue_.empty()) {
        std::fprintf(stderr, "hlocache: %zu uploads to upstream %s not sent before stopping\n",
                     queue_.size(), options_.url.c_str());
      }
      return;
    }
    std::error_code ec;
    if (queue_.empty()) {
      std::filesystem::remove(options_.pending_file, ec);
      return;
    }
    const std::filesystem::path temp = options_.pending_file.string() + ".tmp";
    bool written = false;
    {
      std::ofstream out(temp, std::ios::trunc);
      for (const std::string& key : queue_) out << key << "\n";
      written = static_cast<bool>(out.flush());
    }
    if (written) std::filesystem::rename(temp, options_.pending_file, ec);
    if (!written || ec) {
      std::fprintf(stderr, "hlocache: %zu uploads to upstream %s dropped: cannot write %s\n",
                   queue_.size(), options_.url.c_str(), options_.pending_file.c_str());
      return;
    }
    std::fprintf(stderr, "hlocache: %zu uploads to upstream %s kept in %s for the next run\n",
                 queue_.size(), options_.url.c_str(), options_.pending_file.c_str());
  }

  void RunUploader() {
    std::unique_lock<std::mutex> lock(queue_mu_);
    while (true) {
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      if (const auto wait = availability_.RestLeft(); wait > Clock::duration::zero()) {
        queue_changed_.wait_for(lock, wait);
        continue;
      }
      const std::string key = queue_.front();
      lock.unlock();
      const UploadResult result = UploadNow(key);
      lock.lock();
      if (result == UploadResult::kDone) {
        queue_.pop_front();
        queued_.erase(key);
      }
    }
    SavePending();
  }

  const UpstreamOptions options_;
  cache::Store& store_;
  const std::unique_ptr<storage::Backend> origin_;  // Artifacts: HEAD, reads, uploads, compiles.
  HttpGetterPool getters_;  // The origin's file listings, on connections kept between them.
  SingleFlight<Result<bool>> fetches_;
  SingleFlight<Result<UpstreamCompile>> compiles_;

  mutable std::mutex stats_mu_;  // Guards stats_.
  UpstreamStats stats_;
  storage::Availability availability_;  // The origin's rest after failures.

  // Guards the upload queue. The uploader takes stats_mu_ while holding it; nothing takes
  // them the other way round.
  mutable std::mutex queue_mu_;
  std::condition_variable queue_changed_;
  std::deque<std::string> queue_;
  std::set<std::string, std::less<>> queued_;
  bool stopping_ = false;
  std::thread uploader_;
};

}  // namespace

Result<std::unique_ptr<Upstream>> Upstream::Make(UpstreamOptions options, cache::Store& store) {
  if (storage::IsS3Url(options.url)) {
    storage::S3Options s3;
    s3.ca_cert = options.ca_cert;
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> bucket,
                              storage::MakeS3Backend(options.url, std::move(s3)));
    options.url = bucket->name();
    return std::unique_ptr<Upstream>(
        new UpstreamImpl(std::move(options), store, std::move(bucket), HttpGetOptions{}));
  }
  auto url = ParseServerUrl(options.url);
  if (!url) return Error(InvalidArgument("--upstream: " + url.error().message()));
  options.url = std::move(*url);
  storage::HttpBackendOptions http;
  http.token = options.token;
  http.ca_cert = options.ca_cert;
  http.connect_timeout = options.connect_timeout;
  http.io_timeout = options.io_timeout;
  http.compile_timeout = options.compile_timeout;
  http.headers = options.headers;
  const HttpGetOptions get_options = storage::HttpGetOptionsOf(http);
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> origin,
                            storage::MakeHttpBackend(options.url, std::move(http)));
  return std::unique_ptr<Upstream>(
      new UpstreamImpl(std::move(options), store, std::move(origin), get_options));
}

}  // namespace hlocache::server
