#include "server/upstream.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "cache/key.h"
#include "common/comma_list.h"
#include "common/http_client.h"
#include "common/http_get.h"
#include "common/single_flight.h"
#include "server/verified_put.h"
#include "storage/availability.h"
#include "storage/http_backend.h"
#include "storage/rendezvous.h"
#include "storage/s3_backend.h"

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;

// One origin server or the bucket, with its own rest after failures.
struct Part {
  std::string url;  // Normalized: the name rendezvous hashing scores.
  std::unique_ptr<storage::Backend> backend;
  std::unique_ptr<HttpGetterPool> getters;  // An origin's file listings; null for a bucket.
  storage::Bucket* bucket = nullptr;        // The bucket's own calls (its file index); owned above.
  std::unique_ptr<storage::Availability> availability;  // Made by the upstream that owns it.
};

class UpstreamImpl final : public Upstream {
 public:
  UpstreamImpl(UpstreamOptions options, cache::Store& store, std::vector<Part> origins,
               std::unique_ptr<Part> bucket)
      : options_(std::move(options)),
        store_(store),
        origins_(std::move(origins)),
        bucket_(std::move(bucket)) {
    auto rest = [this](Part& part) {
      part.availability = std::make_unique<storage::Availability>(
          "upstream " + part.url, options_.backoff,
          [](std::string_view line) {
            std::fprintf(stderr, "hlocache: %.*s\n", static_cast<int>(line.size()), line.data());
          },
          // The uploader catches up as soon as an upstream is back.
          [this] { queue_changed_.notify_all(); });
    };
    for (Part& origin : origins_) {
      rest(origin);
      origin_urls_.push_back(origin.url);
    }
    if (bucket_) rest(*bucket_);
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
    Status last = NothingToAsk();
    for (Part* part : ReadOrder(key)) {
      if (!part->availability->Admit()) {
        last = part->availability->Resting();
        continue;
      }
      auto r = part->availability->Record(part->backend->Head(key));
      if (r || r.error().code() != StatusCode::kUnavailable) return r;
      last = r.error();
    }
    return Error(last);
  }

  Result<std::vector<FileEntry>> ListFiles(std::string_view file_namespace, std::string_view prefix,
                                           size_t limit) override {
    Status last = NothingToAsk();
    // The bucket holds what every host uploaded; the origins only what was sent to them.
    if (bucket_) {
      auto listed = ListBucketFiles(file_namespace, prefix, limit);
      if (listed) return listed;
      last = listed.error();
    }
    for (Part& origin : origins_) {
      auto listed = ListFilesAt(origin, file_namespace, prefix, limit);
      if (listed) return listed;
      last = listed.error();
    }
    return Error(last);
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

  void Publish(std::string_view key) override {
    if (bucket_ && bucket_->availability->Admit() &&
        UploadTo(*bucket_, std::string(key)) == UploadResult::kDone) {
      return;
    }
    QueueUpload(key);
  }

  void NoteUse(std::string_view key) override {
    if (bucket_) bucket_->backend->NoteUse(key);
  }

  UpstreamStats stats() const override {
    UpstreamStats s;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      s = stats_;
    }
    auto add = [&s](const Part& part) {
      const storage::AvailabilityStats a = part.availability->stats();
      s.failures += a.failures;
      s.skipped += a.skipped;
      s.up = s.up && a.up;
      s.parts.push_back({part.url, a.up, a.failures, a.skipped});
      const storage::RequestStats r = part.backend->request_stats();
      if (!r.kept) return;
      storage::RequestStats& t = s.requests;
      t.kept = true;
      t.requests += r.requests;
      t.retries += r.retries;
      t.bytes_sent += r.bytes_sent;
      t.bytes_received += r.bytes_received;
      t.latency_micros += r.latency_micros;
      t.errors_unavailable += r.errors_unavailable;
      t.throttled += r.throttled;
      t.errors_denied += r.errors_denied;
      t.errors_refused += r.errors_refused;
    };
    for (const Part& origin : origins_) add(origin);
    if (bucket_) add(*bucket_);
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

  Status NothingToAsk() const { return Unavailable("upstream " + options_.url + ": none is up"); }

  // The key's origins, its first choice first.
  std::vector<Part*> OriginOrder(std::string_view key) {
    std::vector<Part*> order;
    for (size_t i : storage::RendezvousOrder(origin_urls_, key)) order.push_back(&origins_[i]);
    return order;
  }

  // Where an artifact is read from: the bucket (the authority on what exists), then, should
  // it not answer, the key's origins in order.
  std::vector<Part*> ReadOrder(std::string_view key) {
    std::vector<Part*> order;
    if (bucket_) order.push_back(bucket_.get());
    for (Part* origin : OriginOrder(key)) order.push_back(origin);
    return order;
  }

  // Asks each in ReadOrder until one answers (a hit or a miss); one that cannot be reached
  // (or rests) hands the read to the next.
  Result<bool> FetchNow(std::string_view key) {
    Status last = NothingToAsk();
    for (Part* part : ReadOrder(key)) {
      auto fetched = FetchFrom(*part, key);
      if (fetched || fetched.error().code() != StatusCode::kUnavailable) return fetched;
      last = fetched.error();
    }
    return Error(last);
  }

  Result<bool> FetchFrom(Part& part, std::string_view key) {
    if (!part.availability->Admit()) return Error(part.availability->Resting());
    // The body goes through the same checks as an upload, into the store as it arrives.
    std::unique_ptr<VerifiedPut> put;
    storage::ReadSink sink;
    sink.start = [&](uint64_t size) {
      put = std::make_unique<VerifiedPut>(store_, std::string(key), size, options_.strict_checks);
      return true;
    };
    sink.chunk = [&](std::string_view bytes) { return put->Receive(bytes); };
    HLOCACHE_ASSIGN_OR_RETURN(bool found, part.availability->Record(part.backend->Read(key, sink)));
    if (!found) {
      Count(&UpstreamStats::fetch_misses);
      return false;
    }
    auto stored = put->Finish();
    if (!stored) {
      return Error(Status(stored.error().code(),
                          "artifact from upstream " + part.url + ": " + stored.error().message()));
    }
    Count(&UpstreamStats::fetches);
    return true;
  }

  Result<std::vector<FileEntry>> ListBucketFiles(std::string_view file_namespace,
                                                 std::string_view prefix, size_t limit) {
    storage::Availability& availability = *bucket_->availability;
    if (!availability.Admit()) return Error(availability.Resting());
    HLOCACHE_ASSIGN_OR_RETURN(
        std::vector<storage::BucketFile> files,
        availability.Record(bucket_->bucket->ListFiles(file_namespace, prefix, limit)));
    std::vector<FileEntry> out;
    out.reserve(files.size());
    for (storage::BucketFile& f : files)
      out.push_back({std::move(f.path), f.size, std::move(f.key)});
    return out;
  }

  Result<std::vector<FileEntry>> ListFilesAt(Part& origin, std::string_view file_namespace,
                                             std::string_view prefix, size_t limit) {
    storage::Availability& availability = *origin.availability;
    if (!availability.Admit()) return Error(availability.Resting());
    httplib::Params params{{"prefix", std::string(prefix)}};
    if (limit != 0) params.emplace("limit", std::to_string(limit));
    const std::string path =
        httplib::append_query_params("/v1/files/" + std::string(file_namespace), params);
    std::unique_ptr<HttpGetter> getter = origin.getters->Take();
    auto r = getter->GetWhole(path);
    if (!r) {
      return Error(availability.Record(Unavailable(
          "upstream " + origin.url + ": GET /v1/files failed: " + r.error().message())));
    }
    origin.getters->GiveBack(std::move(getter));
    if (r->first != 200) {
      httplib::Response reply;
      reply.status = r->first;
      reply.body = std::move(r->second);
      const std::string why =
          "upstream " + origin.url + ": GET /v1/files answered " + DescribeReply(reply);
      // Counted; a 5xx rests the origin as any request's does.
      (void)availability.Record(reply.status >= 500 ? Unavailable(why) : InvalidArgument(why));
      return Error(Unavailable(why));
    }
    (void)availability.Record(Status::Ok());
    auto parsed = ParseFileListing(r->second);
    if (!parsed) {
      return Error(Unavailable("upstream " + origin.url + ": " + parsed.error().message()));
    }
    return parsed;
  }

  // The bucket first (what it holds is fetched, checked and kept here); then the origins in the
  // key's order, so every host sends a key's compile to the same origin while it is up, and to
  // the next one while it is not.
  Result<UpstreamCompile> CompileNow(std::string_view key, std::string_view hlo_text,
                                     std::string_view target) {
    Status last = NothingToAsk();
    if (bucket_) {
      auto fetched = FetchFrom(*bucket_, key);
      if (fetched && *fetched) {
        auto stored = store_.Get(key);
        if (stored && *stored) {
          UpstreamCompile out;
          out.origin_cache = "hit";
          out.artifact = std::move(**stored);
          return out;
        }
      }
      last = fetched
                 ? Unavailable("upstream " + bucket_->url + " does not hold " + std::string(key))
                 : Unavailable("upstream " + bucket_->url + ": " + fetched.error().message());
    }
    for (Part* origin : OriginOrder(key)) {
      if (!origin->backend->CanCompile(target)) continue;
      auto compiled = CompileAt(*origin, key, hlo_text, target);
      if (compiled) return compiled;
      const StatusCode code = compiled.error().code();
      if (code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition) {
        return compiled;  // The module's fault: the next origin would refuse it alike.
      }
      last = compiled.error();
    }
    return Error(last);
  }

  Result<UpstreamCompile> CompileAt(Part& origin, std::string_view key, std::string_view hlo_text,
                                    std::string_view target) {
    storage::Availability& availability = *origin.availability;
    if (!availability.Admit()) return Error(availability.Resting());
    auto r = origin.backend->Compile(hlo_text, target);
    if (!r) {
      const StatusCode code = r.error().code();
      if (code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition) {
        // The origin's verdict on the module: it is up, and compiling here would fail alike.
        (void)availability.Record(Status::Ok());
        return Error(Status(code, "upstream " + r.error().message()));
      }
      // Unreachable, busy, read-only or refusing this host's token: compiling here is right.
      return Error(Unavailable(availability.Record(Status(r.error())).message()));
    }
    (void)availability.Record(Status::Ok());
    if (r->key != key) {
      // Another compiler id on the origin: its executable is not the one this key names.
      return Error(Unavailable("upstream " + origin.url + " keys this module as " + r->key +
                               ", not " + std::string(key) + " (another compiler)"));
    }
    VerifiedPut put(store_, std::string(key), r->artifact.size(), options_.strict_checks);
    put.Receive(r->artifact);
    auto stored = put.Finish();
    if (!stored) {
      if (stored.error().code() == StatusCode::kInvalidArgument) {
        return Error(
            Unavailable("upstream " + origin.url +
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

  // Where a queued upload goes: the bucket, else the key's first origin that is not resting
  // (where a read of the key looks first); null while every one rests.
  Part* UploadDestination(std::string_view key) {
    if (bucket_)
      return bucket_->availability->RestLeft() > Clock::duration::zero() ? nullptr : bucket_.get();
    for (Part* origin : OriginOrder(key)) {
      if (origin->availability->RestLeft() <= Clock::duration::zero()) return origin;
    }
    return nullptr;
  }

  // How long until an upload destination may be asked again.
  Clock::duration ShortestRest() const {
    if (bucket_) return bucket_->availability->RestLeft();
    Clock::duration shortest = Clock::duration::max();
    for (const Part& origin : origins_) {
      shortest = std::min(shortest, origin.availability->RestLeft());
    }
    return shortest == Clock::duration::max() ? Clock::duration::zero() : shortest;
  }

  UploadResult UploadTo(Part& part, const std::string& key) {
    auto opened = store_.OpenReader(key);
    if (!opened || !*opened) return UploadResult::kDone;  // Gone (evicted) or unreadable.
    std::unique_ptr<cache::ArtifactReader> reader = std::move(*opened);
    const storage::ChunkSource next = [&]() -> Result<std::string_view> {
      HLOCACHE_ASSIGN_OR_RETURN(std::span<const char> chunk, reader->Next());
      return std::string_view(chunk.data(), chunk.size());
    };
    const Status sent =
        part.backend->Write(key, reader->info().size, next, reader->info().artifact);
    if (sent.ok()) {
      (void)part.availability->Record(sent);
      Count(&UpstreamStats::uploads);
      return UploadResult::kDone;
    }
    if (sent.code() == StatusCode::kDataLoss) {
      // The local copy failed its check while it was read (and is quarantined): nothing to send.
      std::fprintf(stderr, "hlocache: upload of %s to upstream %s dropped: %s\n", key.c_str(),
                   part.url.c_str(), sent.message().c_str());
      return UploadResult::kDone;
    }
    if (part.availability->Record(sent).code() == StatusCode::kUnavailable) {
      return UploadResult::kRetry;  // It rests; the key stays queued.
    }
    Count(&UpstreamStats::upload_refused);
    std::fprintf(stderr, "hlocache: upstream %s refused %s: %s\n", part.url.c_str(), key.c_str(),
                 sent.message().c_str());
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
      const std::string key = queue_.front();
      Part* destination = UploadDestination(key);
      if (destination == nullptr) {
        queue_changed_.wait_for(lock, ShortestRest());
        continue;
      }
      lock.unlock();
      const UploadResult result = UploadTo(*destination, key);
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
  std::vector<Part> origins_;     // hlocache servers: reads, compiles, uploads without a bucket.
  std::unique_ptr<Part> bucket_;  // Null without one: reads, and every upload.
  std::vector<std::string> origin_urls_;  // What rendezvous hashing scores, in origins_' order.
  SingleFlight<Result<bool>> fetches_;
  SingleFlight<Result<UpstreamCompile>> compiles_;

  mutable std::mutex stats_mu_;  // Guards stats_.
  UpstreamStats stats_;

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

Status CheckUpstreamList(std::string_view list) {
  const std::vector<std::string> parts = SplitCommaList(list);
  if (parts.empty()) return InvalidArgument("--upstream: no origin or bucket given");
  std::string bucket;
  std::set<std::string, std::less<>> seen;
  for (const std::string& part : parts) {
    std::string name;
    if (storage::IsS3Url(part)) {
      if (!bucket.empty()) {
        return InvalidArgument("--upstream: one bucket at most, not " + bucket + " and " + part);
      }
      bucket = name = part;
    } else {
      auto url = ParseServerUrl(part);
      if (!url) return InvalidArgument("--upstream: " + url.error().message());
      name = std::move(*url);
    }
    if (!seen.insert(name).second) return InvalidArgument("--upstream: " + name + " given twice");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Upstream>> Upstream::Make(UpstreamOptions options, cache::Store& store) {
  HLOCACHE_RETURN_IF_ERROR(CheckUpstreamList(options.url));
  std::vector<Part> origins;
  std::unique_ptr<Part> bucket;
  std::string names;
  // Every origin is reached with the same credentials and waits.
  storage::HttpBackendOptions http;
  http.token = options.token;
  http.ca_cert = options.ca_cert;
  http.connect_timeout = options.connect_timeout;
  http.io_timeout = options.io_timeout;
  http.compile_timeout = options.compile_timeout;
  http.headers = options.headers;
  const HttpGetOptions get_options = storage::HttpGetOptionsOf(http);
  for (const std::string& spec : SplitCommaList(options.url)) {
    Part part;
    if (storage::IsS3Url(spec)) {
      storage::S3Options s3;
      s3.ca_cert = options.ca_cert;
      HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<storage::Bucket> made,
                                storage::MakeS3Backend(spec, std::move(s3)));
      part.bucket = made.get();
      part.backend = std::move(made);
      part.url = part.backend->name();
    } else {
      HLOCACHE_ASSIGN_OR_RETURN(part.url, ParseServerUrl(spec));
      part.getters = std::make_unique<HttpGetterPool>(part.url, get_options);
      HLOCACHE_ASSIGN_OR_RETURN(part.backend, storage::MakeHttpBackend(part.url, http));
    }
    names += (names.empty() ? "" : ",") + part.url;
    if (part.bucket == nullptr) {
      origins.push_back(std::move(part));
    } else {
      bucket = std::make_unique<Part>(std::move(part));
    }
  }
  options.url = std::move(names);
  return std::unique_ptr<Upstream>(
      new UpstreamImpl(std::move(options), store, std::move(origins), std::move(bucket)));
}

}  // namespace hlocache::server
