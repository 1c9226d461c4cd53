// GET /v1/stats, GET /metrics and GET /healthz.
#include "server/context.h"

namespace hlocache::server {
namespace {

// The store's, the compile pool's, the upstream's and the memory tier's figures, read now.
template <typename Render>
void RenderWithSources(ServerContext& ctx, Render render) {
  auto store = ctx.store->Stats();
  std::optional<UpstreamStats> upstream;
  if (ctx.upstream) upstream = ctx.upstream->stats();
  std::optional<MemoryTierStats> tier;
  if (ctx.memory_tier) tier = ctx.memory_tier->Stats();
  Metrics::Sources sources;
  sources.store = store ? &*store : nullptr;
  sources.pool = ctx.pool->stats();
  sources.upstream = upstream ? &*upstream : nullptr;
  sources.memory_tier = tier ? &*tier : nullptr;
  render(sources);
}

}  // namespace

void RegisterInfoRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/v1/stats", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithSources(ctx, [&](const Metrics::Sources& sources) {
      res.set_content(ctx.metrics.RenderStatsJson(sources), "application/json");
    });
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    RenderWithSources(ctx, [&](const Metrics::Sources& sources) {
      res.set_content(ctx.metrics.RenderPrometheus(sources),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
}

}  // namespace hlocache::server
