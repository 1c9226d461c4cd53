// GET /v1/stats, GET /metrics and GET /healthz.
#include "server/context.h"

namespace hlocache::server {
namespace {

template <typename Render>
void RenderWithStore(ServerContext& ctx, Render render) {
  auto stats = ctx.store->Stats();
  std::optional<UpstreamStats> upstream;
  if (ctx.upstream) upstream = ctx.upstream->stats();
  render(stats ? &*stats : nullptr, ctx.pool->stats(), upstream ? &*upstream : nullptr);
}

}  // namespace

void RegisterInfoRoutes(httplib::Server& http, ServerContext& ctx) {
  using compiler::WorkerPoolStats;
  http.Get("/v1/stats", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithStore(ctx, [&](const cache::StoreStats* store, const WorkerPoolStats& pool,
                             const UpstreamStats* upstream) {
      res.set_content(ctx.metrics.RenderStatsJson(store, pool, upstream), "application/json");
    });
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithStore(ctx, [&](const cache::StoreStats* store, const WorkerPoolStats& pool,
                             const UpstreamStats* upstream) {
      res.set_content(ctx.metrics.RenderPrometheus(store, pool, upstream),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
}

}  // namespace hlocache::server
