// What the route handlers share: the store, the compiler pool, access control and counters.
// Internal to server/; server.cc builds one ServerContext and registers the routes on it.
//
// Thread safety: the members are set before the first request and not changed after; the
// store, the pool and the metrics are safe to use from the request threads.
#pragma once

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "common/status.h"
#include "compiler/worker_pool.h"
#include "server/auth.h"
#include "server/connection.h"
#include "server/memory_tier.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/upstream.h"

namespace hlocache::server {

struct ServerContext {
  ServerOptions options;
  std::unique_ptr<cache::Store> store;
  std::unique_ptr<compiler::WorkerPool> pool;
  std::unique_ptr<Upstream> upstream;       // Null without --upstream.
  std::unique_ptr<MemoryTier> memory_tier;  // Null with --memory-tier 0.
  std::optional<TokenTable> tokens;         // Empty: every request has the admin role.
  std::string host_target;                  // The target of a compile that names none.
  std::string compiler_id;                  // Empty when no C++ toolchain was found.
  std::string toolchain_error;              // Why, in that case.
  Metrics metrics;
};

// The role a request needs, from its method and path: none for /healthz, read for lookups,
// keys, stats, metrics and compiles (the server builds those artifacts itself, so a reader
// cannot plant one), write for uploads, admin for deletes.
Role RequiredRole(std::string_view method, std::string_view path);

// A one-line plain-text error body, "error: REASON\n", of type kErrorContentType.
std::string ErrorText(std::string_view reason);
inline constexpr std::string_view kErrorContentType = "text/plain; charset=utf-8";
void SendError(httplib::Response& res, int http_status, std::string_view reason);
// The HTTP status for an error from the store or the compiler.
int HttpStatusOf(const Status& status);

void RegisterArtifactRoutes(httplib::Server& http, ServerContext& ctx);
// The GET of artifact `key` on the quick path (server/connection.h): a hit from the memory tier,
// a small artifact read from the store, or (without an upstream) a miss. Counts it and fills
// `reply` with what the route would send, or returns false, having counted nothing, to leave it
// to the route.
bool AnswerQuickHit(ServerContext& ctx, std::string_view key, const QuickRequest& request,
                    QuickReply& reply);
void RegisterCompileRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterInfoRoutes(httplib::Server& http, ServerContext& ctx);
void RegisterFileRoutes(httplib::Server& http, ServerContext& ctx);

}  // namespace hlocache::server
