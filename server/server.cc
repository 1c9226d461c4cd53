#include "server/server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "cache/dir_lock.h"
#include "common/file.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "server/access_log.h"
#include "server/connection.h"
#include "server/context.h"

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;

// Takes a finished request off the in-flight gauge when it goes out of scope, so that the
// request's counting and logging, done before, are seen by whoever sees the gauge fall.
class InFlightUntilReturn {
 public:
  explicit InFlightUntilReturn(Metrics& metrics) : metrics_(metrics) {}
  ~InFlightUntilReturn() { metrics_.in_flight.fetch_sub(1, std::memory_order_release); }
  InFlightUntilReturn(const InFlightUntilReturn&) = delete;
  InFlightUntilReturn& operator=(const InFlightUntilReturn&) = delete;

 private:
  Metrics& metrics_;
};

// When the request on this thread started (after its headers arrived); each connection is
// served by one thread from start to end.
thread_local Clock::time_point t_request_start;
thread_local bool t_request_started = false;

bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

bool HasBody(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

// Whether a request may go ahead as far as tokens go: its route needs no role, the server has no
// tokens, or its bearer token's role is at least the one needed. `have` is that role (kNone for
// no token or one not valid), for the reply to one refused. Shared by the library's
// pre-routing handler (Admit) and the quick path, which must admit exactly alike.
struct TokenCheck {
  bool admitted = true;
  Role have = Role::kNone;
};
TokenCheck CheckToken(const ServerContext& ctx, Role need, std::string_view authorization) {
  if (need == Role::kNone || !ctx.tokens) return {};
  const Role have = ctx.tokens->Authorize(authorization);
  return {have >= need, have};
}

// Hits answered on the plain server's quick path (connection.h): admitted as Admit admits them,
// then counted and logged as the library's route and logger would.
class QuickHits final : public QuickAnswerer {
 public:
  QuickHits(ServerContext& ctx, AccessLog* log) : ctx_(ctx), log_(log) {}

  bool Answer(const QuickRequest& request, QuickReply& reply) override {
    const std::string_view method = MethodOf(request);
    if (!CheckToken(ctx_, RequiredRole(method, request.path), request.authorization).admitted) {
      return false;  // The library says why (401 or 403).
    }
    const Route route = RouteOf(method, request.path);
    if (route != Route::kArtifactGet && route != Route::kArtifactHead) return false;
    const auto start = Clock::now();
    constexpr std::string_view kPrefix = "/v1/artifacts/";
    if (!AnswerQuickHit(ctx_, request.path.substr(kPrefix.size()), request, reply)) {
      return false;
    }
    t_quick_start = start;
    ctx_.metrics.in_flight.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  void Done(const QuickRequest& request, const QuickReply& reply, bool sent) override {
    // Counted and logged before it leaves the in-flight gauge: a scrape that sees no other
    // request in flight sees every finished one counted.
    InFlightUntilReturn in_flight(ctx_.metrics);
    if (sent && reply.status == 200 && !request.head_only) {
      ctx_.metrics.bytes_out.fetch_add(reply.body.size(), std::memory_order_relaxed);
    }
    const std::string_view method = MethodOf(request);
    ctx_.metrics.CountRequest(RouteOf(method, request.path), reply.status);
    if (log_ == nullptr) return;
    const int64_t micros =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t_quick_start).count();
    // The library logs the body it holds: none for a hit's HEAD, the error text for a 404's.
    log_->Write({request.remote_ip, method, request.path, reply.status, reply.body.size(), micros});
  }

 private:
  static std::string_view MethodOf(const QuickRequest& request) {
    return request.head_only ? "HEAD" : "GET";
  }

  static thread_local Clock::time_point t_quick_start;
  ServerContext& ctx_;
  AccessLog* const log_;
};

thread_local Clock::time_point QuickHits::t_quick_start;

class ServerImpl final : public Server {
 public:
  ~ServerImpl() override { Shutdown(); }

  std::string url() const override { return url_; }
  int port() const override { return port_; }

  void Shutdown() override {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    if (http_) http_->stop();  // Closes the listening socket; requests in flight go on.
    if (listener_.joinable()) listener_.join();  // Returns once every connection is done.
    // server.json goes before the store's lock is released, so it never names a successor.
    if (wrote_server_json_) cache::RemoveServerInfo(ctx_.options.dir);
    ctx_.upstream.reset();  // Stops its uploader, which reads the store.
    ctx_.pool.reset();
    ctx_.memory_tier.reset();
    ctx_.store.reset();  // Flushes access times and marks a clean close.
    log_.reset();
  }

  Status Init(ServerOptions options);

 private:
  // Whether the request may go on; otherwise `res` holds the 401 or 403.
  bool Admit(const httplib::Request& req, httplib::Response& res);
  void Configure();
  void LogRequest(const httplib::Request& req, const httplib::Response& res);

  ServerContext ctx_;
  std::unique_ptr<AccessLog> log_;
  std::unique_ptr<QuickHits> quick_;  // Outlives http_'s threads (declared before it).
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::string url_;
  int port_ = 0;
  bool wrote_server_json_ = false;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

bool ServerImpl::Admit(const httplib::Request& req, httplib::Response& res) {
  const Role need = RequiredRole(req.method, req.path);
  if (need == Role::kNone) return true;
  if (const TokenCheck token = CheckToken(ctx_, need, req.get_header_value("Authorization"));
      !token.admitted) {
    if (token.have == Role::kNone) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"hlocache\"");
      SendError(res, 401,
                req.has_header("Authorization") ? "the bearer token is not valid"
                                                : "a bearer token is required");
    } else {
      SendError(res, 403,
                "a " + std::string(RoleName(token.have)) + " token cannot " + req.method + " " +
                    std::string(RouteName(RouteOf(req.method, req.path))) + "; it needs " +
                    std::string(RoleName(need)));
    }
    return false;
  }
  if (ctx_.options.read_only && need >= Role::kWrite) {
    SendError(res, 403, "this server is read-only");
    return false;
  }
  return true;
}

void ServerImpl::LogRequest(const httplib::Request& req, const httplib::Response& res) {
  const int64_t micros =
      t_request_started
          ? std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t_request_start)
                .count()
          : 0;
  // Left last, as in QuickHits::Done.
  std::optional<InFlightUntilReturn> in_flight;
  if (t_request_started) in_flight.emplace(ctx_.metrics);
  t_request_started = false;
  ctx_.metrics.CountRequest(RouteOf(req.method, req.path), res.status);
  if (!log_) return;
  uint64_t bytes = res.body.size();
  if (bytes == 0 && req.method != "HEAD" && res.has_header("Content-Length")) {
    bytes = std::strtoull(res.get_header_value("Content-Length").c_str(), nullptr, 10);
  }
  log_->Write({req.remote_addr, req.method, req.path, res.status, bytes, micros});
}

void ServerImpl::Configure() {
  httplib::Server& http = *http_;
  const ServerOptions& o = ctx_.options;
  // Without it, small replies wait on delayed ACKs: ~280 requests/s instead of ~50k.
  http.set_tcp_nodelay(true);
  http.set_read_timeout(o.io_timeout);
  http.set_write_timeout(o.io_timeout);
  http.set_keep_alive_timeout(o.keep_alive_timeout.count());
  http.set_keep_alive_max_count(1000);
  http.set_payload_max_length(o.max_body);
  // The plain server brings its own (connection.h).
  if (dynamic_cast<PlainServer*>(&http) == nullptr) {
    const size_t threads = std::max<size_t>(o.threads, 2);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    MarkRequestHeadersRead();
    t_request_start = Clock::now();
    t_request_started = true;
    ctx_.metrics.in_flight.fetch_add(1, std::memory_order_relaxed);
    if (Admit(req, res)) return httplib::Server::HandlerResponse::Unhandled;
    // The body was not read: the connection cannot carry another request.
    if (HasBody(req)) res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  // A client that asks before sending a body learns at once that it would be refused.
  http.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return res.status;
    const std::string length = req.get_header_value("Content-Length");
    if (!length.empty() && std::strtoull(length.c_str(), nullptr, 10) > ctx_.options.max_body) {
      SendError(res, 413, "the body is larger than this server accepts");
      return 413;
    }
    return 100;
  });
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.has_header("Content-Length")) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const char* reason = res.status == 404   ? "no such route"
                             : res.status == 413 ? "the body is larger than this server accepts"
                             : res.status == 414 ? "the request line is too long"
                             : res.status < 500  ? "malformed request"
                                                 : "internal error";
        SendError(res, res.status, reason);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                std::exception_ptr) { SendError(res, 500, "internal error"); });
  // A reply to a request whose body was left unread ends the connection, and says so.
  http.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    if (RequestBodyLeftUnread()) res.set_header("Connection", "close");
  });
  http.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { LogRequest(req, res); });

  RegisterArtifactRoutes(http, ctx_);
  RegisterCompileRoutes(http, ctx_);
  RegisterInfoRoutes(http, ctx_);
  RegisterFileRoutes(http, ctx_);
  // Known paths with a method they do not take: 405 rather than "no such route".
  auto not_allowed = [](const char* allow) {
    return [allow](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allow);
      SendError(res, 405, req.method + " is not allowed here (" + allow + ")");
    };
  };
  http.Post(R"(/v1/artifacts/([^/]*))", not_allowed("GET, HEAD, PUT, DELETE"));
  http.Patch(R"(/v1/artifacts/([^/]*))", not_allowed("GET, HEAD, PUT, DELETE"));
  for (const char* path : {"/v1/compile", "/v1/keys"}) {
    http.Get(path, not_allowed("POST"));
    http.Put(path, not_allowed("POST"));
    http.Delete(path, not_allowed("POST"));
  }
  for (const char* path : {"/v1/stats", "/metrics", "/healthz"}) {
    http.Post(path, not_allowed("GET, HEAD"));
    http.Put(path, not_allowed("GET, HEAD"));
    http.Delete(path, not_allowed("GET, HEAD"));
  }
}

Status ServerImpl::Init(ServerOptions options) {
  ctx_.options = std::move(options);
  const ServerOptions& o = ctx_.options;
  HLOCACHE_RETURN_IF_ERROR(CheckServerOptions(o));
  if (!o.tokens_file.empty()) {
    HLOCACHE_ASSIGN_OR_RETURN(TokenTable tokens, TokenTable::Load(o.tokens_file));
    ctx_.tokens.emplace(std::move(tokens));
  }
  if (!o.access_log.empty()) {
    HLOCACHE_ASSIGN_OR_RETURN(log_, AccessLog::Open(o.access_log, o.access_log_json));
  }

  cache::StoreOptions store_options;
  store_options.read_only = o.read_only;
  store_options.max_bytes = o.max_size;
  store_options.sync_puts = o.sync_puts;
  HLOCACHE_ASSIGN_OR_RETURN(ctx_.store, cache::Store::Open(o.dir, store_options));

  if (!o.upstream_url.empty()) {
    UpstreamOptions upstream;
    upstream.url = o.upstream_url;
    upstream.token = o.upstream_token;
    upstream.ca_cert = o.upstream_ca_cert;
    upstream.compile_timeout = o.compile_timeout;
    upstream.strict_checks = o.verify_uploads;
    upstream.pending_file = o.dir / "upstream-pending";
    HLOCACHE_ASSIGN_OR_RETURN(ctx_.upstream, Upstream::Make(std::move(upstream), *ctx_.store));
  }

  ctx_.host_target = compiler::HostCpuTarget();
  compiler::ToolchainOptions toolchain_options;
  toolchain_options.cxx = o.cxx;
  auto toolchain = compiler::Toolchain::Probe(toolchain_options);
  compiler::WorkerPoolOptions pool_options;
  pool_options.worker_binary = o.worker_binary.empty() ? CurrentExecutable() : o.worker_binary;
  if (toolchain) {
    ctx_.compiler_id = toolchain->CompilerId();
    pool_options.worker_args = {"--cxx", toolchain->cxx_path().string()};
  } else {
    ctx_.toolchain_error = toolchain.error().message();
  }
  pool_options.workers = std::max<size_t>(o.compile_workers, 1);
  pool_options.max_queue = o.compile_queue;
  pool_options.timeout = o.compile_timeout;
  ctx_.pool = std::make_unique<compiler::WorkerPool>(std::move(pool_options));
  if (o.memory_tier_bytes != 0)
    ctx_.memory_tier = std::make_unique<MemoryTier>(o.memory_tier_bytes);
  // With --zero-copy a reply may go out with splice() or sendfile(), which have no MSG_NOSIGNAL:
  // a client gone mid-reply must fail that send, not end the process.
  ::signal(SIGPIPE, SIG_IGN);

  const bool tls = !o.tls_cert.empty();
  if (tls) {
    http_ =
        std::make_unique<WideBacklog<httplib::SSLServer>>(o.tls_cert.c_str(), o.tls_key.c_str());
    if (!http_->is_valid()) {
      return InvalidArgument("cannot load the TLS certificate " + o.tls_cert.string() +
                             " and key " + o.tls_key.string());
    }
  } else {
    auto plain = std::make_unique<PlainServer>(o.io_timeout, std::max<size_t>(o.threads, 2));
    if (!plain->is_valid()) {
      return Unavailable(std::string("cannot create the connections' epoll set: ") +
                         std::strerror(errno));
    }
    // Such a request may never reach the access log: say what happened to it.
    plain->set_cut_short_handler([this](const std::string& remote, const std::string& why) {
      ctx_.metrics.cut_short.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr, "hlocache: serve: a request from %s was cut short: %s\n", remote.c_str(),
                   why.c_str());
    });
    quick_ = std::make_unique<QuickHits>(ctx_, log_.get());
    plain->set_quick_answerer(quick_.get());
    http_ = std::move(plain);
  }
  Configure();

  if (o.port == 0) {
    port_ = http_->bind_to_any_port(o.host);
  } else {
    port_ = http_->bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (port_ <= 0) {
    return Unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                       " (in use, or not an address of this host)");
  }
  if (tls) {
    static_cast<WideBacklog<httplib::SSLServer>&>(*http_).WidenBacklog();
  } else {
    static_cast<PlainServer&>(*http_).WidenBacklog();
  }
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  url_ = std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port_);

  HLOCACHE_RETURN_IF_ERROR(
      cache::WriteServerInfo(o.dir, {static_cast<long>(::getpid()), url_, UtcTimestamp()}));
  wrote_server_json_ = true;
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() only takes effect on a running server: wait until it runs.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

}  // namespace

Status CheckServerOptions(const ServerOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key go together");
  }
  if (o.tokens_file.empty() && !o.insecure_open && !IsLoopback(o.host)) {
    return InvalidArgument(
        "without --tokens every client may read, write and delete; listen on "
        "a loopback address, give --tokens FILE, or pass --insecure-open");
  }
  if (o.port < 0 || o.port > 65535) return InvalidArgument("port out of range");
  if (!o.upstream_url.empty()) {
    if (o.read_only) {
      return InvalidArgument(
          "--readonly and --upstream do not go together: a server reading through keeps what it "
          "fetches");
    }
    HLOCACHE_RETURN_IF_ERROR(CheckUpstreamList(o.upstream_url));
  }
  return Status::Ok();
}

Role RequiredRole(std::string_view method, std::string_view path) {
  if (path == "/healthz") return Role::kNone;
  if (path.starts_with("/v1/artifacts/")) {
    if (method == "PUT") return Role::kWrite;
    if (method == "DELETE") return Role::kAdmin;
  }
  return Role::kRead;
}

std::string ErrorText(std::string_view reason) {
  std::string body = "error: ";
  // One line, whatever the reason holds.
  for (const char c : reason) body += (c == '\n' || c == '\r') ? ' ' : c;
  body += '\n';
  return body;
}

void SendError(httplib::Response& res, int http_status, std::string_view reason) {
  res.status = http_status;
  res.set_content(ErrorText(reason), std::string(kErrorContentType));
}

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kResourceExhausted:
      return 507;  // The store's only exhaustion on a write is the disk.
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kFailedPrecondition:
      return 422;
    default:
      return 500;
  }
}

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  auto server = std::make_unique<ServerImpl>();
  HLOCACHE_RETURN_IF_ERROR(server->Init(std::move(options)));
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace hlocache::server
