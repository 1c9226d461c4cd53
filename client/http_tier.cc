// The HTTP tier: a server's artifact routes and its compile route.
#include "client/tier.h"
#include "common/http_client.h"
#include "common/http_get.h"
#include "compiler/target.h"

namespace hlocache::client {
namespace {

class HttpTier final : public Tier {
 public:
  HttpTier(std::string url, HttpTierOptions options)
      : url_(std::move(url)), options_(std::move(options)), getters_(url_, GetOptions(options_)) {}

  const std::string& name() const override { return url_; }
  bool remote() const override { return true; }

  Result<std::optional<std::string>> Get(std::string_view key) override {
    std::string body;
    std::unique_ptr<HttpGetter> getter = getters_.Take();
    auto status = getter->Get(
        "/v1/artifacts/" + std::string(key),
        [&](int, std::optional<uint64_t> length) {
          if (length) body.reserve(*length);  // An artifact is held whole anyway.
          return true;
        },
        [&](std::string_view bytes) {
          body.append(bytes);
          return true;
        });
    if (!status) return Error(Unavailable("GET failed: " + status.error().message()));
    getters_.GiveBack(std::move(getter));
    if (*status == 404) return std::optional<std::string>();
    if (*status != 200) {
      httplib::Response reply;
      reply.status = *status;
      reply.body = std::move(body);
      return Error(Unavailable(url_ + ": GET answered " + DescribeReply(reply)));
    }
    return std::optional<std::string>(std::move(body));
  }

  Status Put(std::string_view key, std::string_view bytes,
             const cache::ArtifactInfo& info) override {
    (void)info;  // The server reads what it needs from the artifact's header.
    auto client = Client(options_.request_timeout);
    client->set_read_timeout(UploadReplyTimeout(bytes.size(), options_.request_timeout));
    auto r = client->Put(("/v1/artifacts/" + std::string(key)).c_str(), bytes.data(), bytes.size(),
                         "application/octet-stream");
    if (!r) return Failure("PUT", r.error());
    if (r->status == 200 || r->status == 201) return Status::Ok();
    if (r->status == 401 || r->status == 403) {
      return PermissionDenied(url_ + ": PUT answered " + DescribeReply(*r));
    }
    return Unavailable(url_ + ": PUT answered " + DescribeReply(*r));
  }

  bool CanCompile(std::string_view target) const override {
    return compiler::CpuTargetLevel(target) != 0 || compiler::IsCudaTarget(target);
  }

  Result<RemoteCompile> Compile(std::string_view hlo_text, std::string_view target) override {
    auto client = Client(options_.compile_timeout);
    const std::string path = "/v1/compile?target=" + std::string(target);
    auto r = client->Post(path.c_str(), hlo_text.data(), hlo_text.size(), "text/plain");
    if (!r) return Error(Failure("POST /v1/compile", r.error()));
    if (r->status == 400 || r->status == 422 || r->status == 403) {
      // The module's fault (400, 422) or the server's policy (403: read-only, or this token may
      // not compile), not a failure: the server stays in use, and the caller's own compile
      // reports any error in the module in its own words.
      return Error(FailedPrecondition(url_ + ": compile answered " + DescribeReply(*r)));
    }
    if (r->status != 200)
      return Error(Unavailable(url_ + ": compile answered " + DescribeReply(*r)));
    RemoteCompile out;
    out.was_cached = r->get_header_value("X-Hlocache-Cache") == "hit";
    out.artifact = std::move(r->body);
    return out;
  }

 private:
  std::unique_ptr<httplib::Client> Client(std::chrono::milliseconds timeout) const {
    return MakeHttpClient(url_, {options_.token, options_.ca_cert, options_.connect_timeout},
                          timeout);
  }

  Status Failure(const std::string& what, httplib::Error error) const {
    return Unavailable(url_ + ": " + what + " failed: " + httplib::to_string(error));
  }

  static HttpGetOptions GetOptions(const HttpTierOptions& options) {
    HttpGetOptions o;
    o.connect_timeout = options.connect_timeout;
    o.stall_timeout = options.request_timeout;
    o.bearer_token = options.token;
    o.ca_cert = options.ca_cert;
    return o;
  }

  const std::string url_;
  const HttpTierOptions options_;
  HttpGetterPool getters_;  // Artifact reads, on connections kept between them.
};

}  // namespace

Result<std::unique_ptr<Tier>> MakeHttpTier(const std::string& url, const HttpTierOptions& options) {
  HLOCACHE_ASSIGN_OR_RETURN(std::string parsed, ParseServerUrl(url));
  return std::unique_ptr<Tier>(new HttpTier(std::move(parsed), options));
}

}  // namespace hlocache::client
