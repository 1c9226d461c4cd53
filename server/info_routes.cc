// GET /v1/stats, GET /metrics and GET /healthz.
#include "server/context.h"

namespace hlocache::server {
namespace {

template <typename Render>
void RenderWithStore(ServerContext& ctx, Render render) {
  auto stats = ctx.store->Stats();
  render(stats ? &*stats : nullptr, ctx.pool->stats());
}

}  // namespace

void RegisterInfoRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/v1/stats", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithStore(ctx,
                    [&](const cache::StoreStats* store, const compiler::WorkerPoolStats& pool) {
                      res.set_content(ctx.metrics.RenderStatsJson(store, pool), "application/json");
                    });
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithStore(ctx,
                    [&](const cache::StoreStats* store, const compiler::WorkerPoolStats& pool) {
                      res.set_content(ctx.metrics.RenderPrometheus(store, pool),
                                      "text/plain; version=0.0.4; charset=utf-8");
                    });
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
}

}  // namespace hlocache::server
