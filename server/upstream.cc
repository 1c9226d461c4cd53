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

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string ArtifactPath(std::string_view key) { return "/v1/artifacts/" + std::string(key); }

HttpGetOptions GetOptions(const UpstreamOptions& options) {
  HttpGetOptions o;
  o.connect_timeout = options.connect_timeout;
  o.stall_timeout = options.io_timeout;
  o.bearer_token = options.token;
  o.ca_cert = options.ca_cert;
  o.headers = options.headers;
  return o;
}

class UpstreamImpl final : public Upstream {
 public:
  UpstreamImpl(UpstreamOptions options, cache::Store& store)
      : options_(std::move(options)),
        store_(store),
        http_settings_{options_.token, options_.ca_cert, options_.connect_timeout},
        getters_(options_.url, GetOptions(options_)),
        backoff_(options_.backoff) {
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
    if (!Admit()) return Error(BackingOff());
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->Head(ArtifactPath(key));
    if (!r) return Error(BackOff("upstream HEAD failed: " + r.error().message()));
    getters_.GiveBack(std::move(getter));
    MarkUp();
    if (r->status == 404) return std::optional<uint64_t>();
    if (r->status != 200) return Error(Refused("HEAD", r->status, ""));
    return std::optional<uint64_t>(r->content_length.value_or(0));
  }

  Result<std::vector<FileEntry>> ListFiles(std::string_view file_namespace, std::string_view prefix,
                                           size_t limit) override {
    if (!Admit()) return Error(BackingOff());
    httplib::Params params{{"prefix", std::string(prefix)}};
    if (limit != 0) params.emplace("limit", std::to_string(limit));
    const std::string path =
        httplib::append_query_params("/v1/files/" + std::string(file_namespace), params);
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->GetWhole(path);
    if (!r) return Error(BackOff("upstream GET /v1/files failed: " + r.error().message()));
    getters_.GiveBack(std::move(getter));
    MarkUp();
    if (r->first != 200) return Error(Refused("GET /v1/files", r->first, r->second));
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
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      s.pending_uploads = queue_.size();
    }
    return s;
  }

 private:
  std::unique_ptr<httplib::Client> Client(std::chrono::milliseconds io_timeout) const {
    auto client = MakeHttpClient(options_.url, http_settings_, io_timeout);
    if (!options_.headers.empty()) {
      client->set_default_headers(
          httplib::Headers(options_.headers.begin(), options_.headers.end()));
    }
    return client;
  }

  // Whether a request may try the origin now; counts the ones that may not.
  bool Admit() {
    if (!backoff_.Resting()) return true;
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.skipped;
    return false;
  }

  Clock::duration BackoffLeft() const { return backoff_.Left(); }

  void MarkUp() {
    bool was_down = false;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      was_down = !stats_.up;
      stats_.up = true;
    }
    backoff_.Succeeded();
    if (was_down) {
      std::fprintf(stderr, "hlocache: upstream %s is reachable again\n", options_.url.c_str());
      queue_changed_.notify_all();  // The uploader catches up now rather than after its wait.
    }
  }

  Status TransportFailure(const std::string& what, httplib::Error error) {
    return BackOff("upstream " + options_.url + ": " + what +
                   " failed: " + httplib::to_string(error));
  }

  // The origin could not be reached, or cannot take what it is sent: leave it alone for a
  // while, longer each time.
  Status BackOff(const std::string& reason) {
    bool was_up = false;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      ++stats_.failures;
      was_up = stats_.up;
      stats_.up = false;
    }
    backoff_.Failed();
    if (was_up) std::fprintf(stderr, "hlocache: %s; going on without it\n", reason.c_str());
    return Unavailable(reason);
  }

  // The origin answered, but not with what was asked for (a 5xx, or a 401 or 403 that a wrong
  // --upstream-token would give): counted, so that a misconfigured host shows in its metrics.
  Status Refused(const std::string& what, const httplib::Response& r) {
    Count(&UpstreamStats::failures);
    return Unavailable("upstream " + options_.url + ": " + what + " answered " + DescribeReply(r));
  }
  Status Refused(const std::string& what, int status, std::string body) {
    httplib::Response reply;
    reply.status = status;
    reply.body = std::move(body);
    return Refused(what, reply);
  }

  Status BackingOff() const {
    return Unavailable("upstream " + options_.url + " is unreachable; retrying later");
  }

  void Count(uint64_t UpstreamStats::*counter) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++(stats_.*counter);
  }

  Result<bool> FetchNow(std::string_view key) {
    if (!Admit()) return Error(BackingOff());
    // The body goes through the same checks as an upload, into the store as it arrives.
    int status = 0;
    std::unique_ptr<VerifiedPut> put;
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->Get(
        ArtifactPath(key),
        [&](int answered, std::optional<uint64_t> length) {
          status = answered;
          if (status != 200 || !length) return false;
          put = std::make_unique<VerifiedPut>(store_, std::string(key), *length,
                                              options_.strict_checks);
          return true;
        },
        [&](std::string_view bytes) { return put->Receive(bytes); });
    if (status == 0) return Error(BackOff("upstream GET failed: " + r.error().message()));
    MarkUp();
    if (status == 404) {
      getters_.GiveBack(std::move(getter));
      Count(&UpstreamStats::fetch_misses);
      return false;
    }
    // A body the handler declined is not read: the status alone describes it.
    if (status != 200) return Error(Refused("GET", status, ""));
    if (!put) return Error(Unavailable("upstream " + options_.url + ": GET without a length"));
    if (!r) return Error(BackOff("upstream GET failed: " + r.error().message()));  // Mid-body.
    getters_.GiveBack(std::move(getter));
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
    if (!Admit()) return Error(BackingOff());
    const std::string path = "/v1/compile?target=" + std::string(target);
    auto r = Client(options_.compile_timeout)
                 ->Post(path, hlo_text.data(), hlo_text.size(), "text/plain");
    if (!r) return Error(TransportFailure("POST /v1/compile", r.error()));
    MarkUp();
    if (r->status == 400) {
      return Error(InvalidArgument("upstream: " + DescribeReply(*r)));
    }
    if (r->status == 422) {
      return Error(FailedPrecondition("upstream: " + DescribeReply(*r)));
    }
    if (r->status != 200) return Error(Refused("POST /v1/compile", *r));
    const std::string origin_key = r->get_header_value("X-Hlocache-Key");
    if (origin_key != key) {
      // Another compiler id on the origin: its executable is not the one this key names.
      return Error(Unavailable("upstream " + options_.url + " keys this module as " + origin_key +
                               ", not " + std::string(key) + " (another compiler)"));
    }
    VerifiedPut put(store_, std::string(key), r->body.size(), options_.strict_checks);
    put.Receive(r->body);
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
    out.origin_cache = r->get_header_value("X-Hlocache-Cache");
    out.artifact = std::move(r->body);
    return out;
  }

  enum class UploadResult { kDone, kRetry };

  UploadResult UploadNow(const std::string& key) {
    auto opened = store_.OpenReader(key);
    if (!opened || !*opened) return UploadResult::kDone;  // Gone (evicted) or unreadable.
    std::shared_ptr<cache::ArtifactReader> reader(std::move(*opened));
    auto client = Client(options_.io_timeout);
    client->set_read_timeout(UploadReplyTimeout(reader->info().size, options_.io_timeout));
    auto r = client->Put(
        ArtifactPath(key), static_cast<size_t>(reader->info().size),
        [reader](size_t, size_t, httplib::DataSink& sink) {
          auto chunk = reader->Next();
          if (!chunk || chunk->empty()) return false;
          return sink.write(chunk->data(), chunk->size());
        },
        "application/octet-stream");
    if (!r) {
      (void)TransportFailure("PUT", r.error());  // Counted; the key stays queued.
      return UploadResult::kRetry;
    }
    MarkUp();
    if (r->status == 200 || r->status == 201) {
      Count(&UpstreamStats::uploads);
      return UploadResult::kDone;
    }
    if (r->status >= 500) {
      // The origin may be full or busy: try again after a backoff.
      (void)BackOff("upstream " + options_.url + ": PUT " + key + " answered " + DescribeReply(*r));
      return UploadResult::kRetry;
    }
    Count(&UpstreamStats::upload_refused);
    std::fprintf(stderr, "hlocache: upstream %s refused %s: %s\n", options_.url.c_str(),
                 key.c_str(), DescribeReply(*r).c_str());
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
      if (const auto wait = BackoffLeft(); wait > Clock::duration::zero()) {
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
  const HttpClientSettings http_settings_;
  HttpGetterPool getters_;  // HEADs, listings and fetches: connections kept between them.
  SingleFlight<Result<bool>> fetches_;
  SingleFlight<Result<UpstreamCompile>> compiles_;

  mutable std::mutex stats_mu_;  // Guards stats_.
  UpstreamStats stats_;
  Backoff backoff_;  // The origin's rest after failures.

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
  auto url = ParseServerUrl(options.url);
  if (!url) return Error(InvalidArgument("--upstream: " + url.error().message()));
  options.url = std::move(*url);
  return std::unique_ptr<Upstream>(new UpstreamImpl(std::move(options), store));
}

}  // namespace hlocache::server
