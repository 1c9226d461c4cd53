#include "storage/http_backend.h"

#include "common/http_client.h"
#include "common/http_get.h"
#include "compiler/artifact/targets.h"

namespace hlocache::storage {
namespace {

std::string ArtifactPath(std::string_view key) { return "/v1/artifacts/" + std::string(key); }

class HttpBackend final : public Backend {
 public:
  HttpBackend(std::string url, HttpBackendOptions options)
      : url_(std::move(url)),
        options_(std::move(options)),
        getters_(url_, HttpGetOptionsOf(options_)) {}

  const std::string& name() const override { return url_; }
  bool remote() const override { return true; }

  Result<std::optional<uint64_t>> Head(std::string_view key) override {
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->Head(ArtifactPath(key));
    if (!r) return Error(Unavailable(url_ + ": HEAD failed: " + r.error().message()));
    getters_.GiveBack(std::move(getter));
    if (r->status == 404) return std::optional<uint64_t>();
    if (r->status != 200) return Error(Refused("HEAD", r->status, ""));
    return std::optional<uint64_t>(r->content_length.value_or(0));
  }

  Result<bool> Read(std::string_view key, const ReadSink& sink) override {
    int status = 0;
    bool stopped = false, no_length = false;
    std::string error_body;
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto r = getter->Get(
        ArtifactPath(key),
        [&](int answered, std::optional<uint64_t> length) {
          status = answered;
          if (status == 404) return false;
          if (status != 200) return status < 500;  // A short reason to report; 5xx: not read.
          no_length = !length;
          if (no_length) return false;
          stopped = !sink.start(*length);
          return !stopped;
        },
        [&](std::string_view bytes) {
          if (status != 200) {
            if (error_body.size() < 4096) error_body.append(bytes);
            return true;
          }
          stopped = !sink.chunk(bytes);
          return !stopped;
        });
    if (status == 0) return Error(Unavailable(url_ + ": GET failed: " + r.error().message()));
    if (status == 404) {
      getters_.GiveBack(std::move(getter));
      return false;
    }
    if (status != 200) return Error(Refused("GET", status, std::move(error_body)));
    if (no_length) return Error(Unavailable(url_ + ": GET answered without a Content-Length"));
    if (stopped) return true;  // The caller stopped it and knows why.
    if (!r) return Error(Unavailable(url_ + ": GET failed: " + r.error().message()));  // Mid-body.
    getters_.GiveBack(std::move(getter));
    return true;
  }

  Status Write(std::string_view key, uint64_t size, const ChunkSource& next,
               const cache::ArtifactInfo& info) override {
    (void)info;  // The server reads what it needs from the artifact's header.
    auto client = Client(options_.io_timeout);
    client->set_read_timeout(UploadReplyTimeout(size, options_.io_timeout));
    Status source_error;
    auto r = client->Put(
        ArtifactPath(key), static_cast<size_t>(size),
        [&](size_t, size_t, httplib::DataSink& sink) {
          auto piece = next();
          if (!piece) {
            source_error = piece.error();
            return false;
          }
          if (piece->empty()) return false;
          return sink.write(piece->data(), piece->size());
        },
        "application/octet-stream");
    if (!source_error.ok()) return source_error;
    if (!r) return Unavailable(url_ + ": PUT failed: " + httplib::to_string(r.error()));
    if (r->status == 200 || r->status == 201) return Status::Ok();
    return Refused("PUT", *r);
  }

  bool CanCompile(std::string_view target) const override {
    return compiler::CpuTargetLevel(target) != 0 || compiler::IsCudaTarget(target);
  }

  Result<RemoteCompile> Compile(std::string_view hlo_text, std::string_view target) override {
    auto client = Client(options_.compile_timeout);
    const std::string path = "/v1/compile?target=" + std::string(target);
    auto r = client->Post(path, hlo_text.data(), hlo_text.size(), "text/plain");
    if (!r) {
      return Error(
          Unavailable(url_ + ": POST /v1/compile failed: " + httplib::to_string(r.error())));
    }
    // The module's fault (400 malformed, 422 unsupported) or the server's policy (401, 403:
    // read-only, or this token may not compile): the server is up and stays in use. Anything
    // else the caller may try elsewhere, or compile itself.
    const std::string why = url_ + ": compile answered " + DescribeReply(*r);
    if (r->status == 400) return Error(InvalidArgument(why));
    if (r->status == 422) return Error(FailedPrecondition(why));
    if (r->status == 401 || r->status == 403) return Error(PermissionDenied(why));
    if (r->status != 200) return Error(Unavailable(why));
    RemoteCompile out;
    out.cache_status = r->get_header_value("X-Hlocache-Cache");
    out.key = r->get_header_value("X-Hlocache-Key");
    out.artifact = std::move(r->body);
    return out;
  }

 private:
  std::unique_ptr<httplib::Client> Client(std::chrono::milliseconds timeout) const {
    auto client =
        MakeHttpClient(url_, {options_.token, options_.ca_cert, options_.connect_timeout}, timeout);
    if (!options_.headers.empty()) {
      client->set_default_headers(
          httplib::Headers(options_.headers.begin(), options_.headers.end()));
    }
    return client;
  }

  // An answer that is not what was asked for: a refused token is kPermissionDenied and another
  // 4xx kInvalidArgument (the request's fault: nothing to rest on, nothing to retry), anything
  // else (a 5xx: full, busy, failing) kUnavailable.
  Status Refused(const std::string& what, const httplib::Response& r) const {
    const std::string why = url_ + ": " + what + " answered " + DescribeReply(r);
    if (r.status == 401 || r.status == 403) return PermissionDenied(why);
    if (r.status >= 400 && r.status < 500) return InvalidArgument(why);
    return Unavailable(why);
  }
  Status Refused(const std::string& what, int status, std::string body) const {
    httplib::Response reply;
    reply.status = status;
    reply.body = std::move(body);
    return Refused(what, reply);
  }

  const std::string url_;
  const HttpBackendOptions options_;
  HttpGetterPool getters_;  // HEADs and reads, on connections kept between them.
};

}  // namespace

HttpGetOptions HttpGetOptionsOf(const HttpBackendOptions& options) {
  HttpGetOptions o;
  o.connect_timeout = options.connect_timeout;
  o.stall_timeout = options.io_timeout;
  o.bearer_token = options.token;
  o.ca_cert = options.ca_cert;
  o.headers = options.headers;
  return o;
}

Result<std::unique_ptr<Backend>> MakeHttpBackend(const std::string& url,
                                                 HttpBackendOptions options) {
  HLOCACHE_ASSIGN_OR_RETURN(std::string parsed, ParseServerUrl(url));
  return std::unique_ptr<Backend>(new HttpBackend(std::move(parsed), std::move(options)));
}

}  // namespace hlocache::storage
