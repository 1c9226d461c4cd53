// POST /v1/compile and POST /v1/keys: HLO text in, an artifact or a key out.
#include <nlohmann/json.hpp>

#include "compiler/artifact/container.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/hlo/parser.h"
#include "compiler/target.h"
#include "keying/keying.h"
#include "server/context.h"

namespace hlocache::server {
namespace {

constexpr const char* kRequestName = "request";

// Parses and keys the request's module for `compiler_id`, or answers the error.
std::optional<keying::KeyedModule> KeyRequest(const httplib::Request& req, const std::string& body,
                                              httplib::Response& res, const std::string& target,
                                              const std::string& compiler_id,
                                              std::optional<hlo::Module>* module_out) {
  (void)req;
  if (body.empty()) {
    SendError(res, 400, "the body must be the HLO module's text");
    return std::nullopt;
  }
  auto module = hlo::ParseModule(body, kRequestName);
  if (!module) {
    SendError(res, 400, module.error().message());
    return std::nullopt;
  }
  keying::KeySettings settings;
  settings.target = target;
  settings.compiler_id = compiler_id;
  auto keyed = keying::KeyModule(*module, settings);
  if (!keyed) {
    SendError(res, keyed.error().code() == StatusCode::kFailedPrecondition ? 422 : 400,
              keyed.error().message());
    return std::nullopt;
  }
  if (module_out) module_out->emplace(std::move(*module));
  return std::move(*keyed);
}

void HandleKeys(ServerContext& ctx, const httplib::Request& req, const std::string& body,
                httplib::Response& res) {
  ctx.metrics.bytes_in.fetch_add(body.size(), std::memory_order_relaxed);
  const std::string target = req.has_param("target") ? req.get_param_value("target") : "";
  std::string compiler_id = req.has_param("compiler_id")
                                ? req.get_param_value("compiler_id")
                                : compiler::CompilerIdFor(target, ctx.compiler_id);
  auto keyed = KeyRequest(req, body, res, target, compiler_id, nullptr);
  if (!keyed) return;
  nlohmann::json j;
  j["key"] = keyed->key.text;
  j["target"] = keyed->target;
  j["compiler_id"] = keyed->compiler_id;
  j["parts"] = {{"graph", keyed->key.graph.Hex()},
                {"target", keyed->key.target.Hex()},
                {"compiler_id", keyed->key.compiler_id.Hex()},
                {"options", keyed->key.options.Hex()}};
  res.set_content(j.dump() + "\n", "application/json");
}

void SendArtifact(ServerContext& ctx, httplib::Response& res, const std::string& key,
                  std::string artifact, std::string_view how) {
  ctx.metrics.bytes_out.fetch_add(artifact.size(), std::memory_order_relaxed);
  res.set_header("X-Hlocache-Key", key);
  res.set_header("X-Hlocache-Cache", std::string(how));
  res.set_header("Content-Type", "application/octet-stream");
  res.body = std::move(artifact);
}

void HandleCompile(ServerContext& ctx, const httplib::Request& req, const std::string& body,
                   httplib::Response& res) {
  ctx.metrics.bytes_in.fetch_add(body.size(), std::memory_order_relaxed);
  std::string target = req.has_param("target") ? req.get_param_value("target") : ctx.host_target;
  if (Status s = cache::ValidateTarget(target); !s.ok()) return SendError(res, 400, s.message());
  const bool gpu = compiler::IsCudaTarget(target);
  if (compiler::CpuTargetLevel(target) == 0 && !gpu) {
    return SendError(res, 422,
                     "this server cannot build target " + target +
                         " (it builds cpu-x86-64-v2, -v3 and -v4, cuda-sm_80 and cuda-sm_90)");
  }
  if (ctx.compiler_id.empty()) {
    return SendError(res, 503, "this server has no C++ toolchain: " + ctx.toolchain_error);
  }
  // GPU executables are built by NVRTC, on a server with no GPU as well.
  const std::string compiler_id = gpu ? compiler::CudaCompilerId() : ctx.compiler_id;
  if (gpu) {
    if (auto nvrtc = compiler::Nvrtc::Get(); !nvrtc) {
      return SendError(res, 503,
                       "this server cannot build " + target + ": " + nvrtc.error().message());
    }
  }
  std::optional<hlo::Module> module;
  auto keyed = KeyRequest(req, body, res, target, compiler_id, &module);
  if (!keyed) return;
  const std::string& key = keyed->key.text;

  auto stored = ctx.store->Get(key);
  if (!stored) {
    ctx.metrics.store_errors.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, HttpStatusOf(stored.error()), stored.error().message());
  }
  if (*stored) {
    ctx.metrics.hits.fetch_add(1, std::memory_order_relaxed);
    ctx.metrics.compile_saved_micros.fetch_add(
        static_cast<uint64_t>(compiler::PeekCompileSeconds(**stored) * 1e6),
        std::memory_order_relaxed);
    if (ctx.upstream) ctx.upstream->NoteUse(key);
    return SendArtifact(ctx, res, key, std::move(**stored), "hit");
  }
  ctx.metrics.misses.fetch_add(1, std::memory_order_relaxed);
  if (ctx.options.read_only) {
    return SendError(res, 403,
                     "this server is read-only: it serves stored artifacts and "
                     "compiles nothing new (key " +
                         key + ")");
  }
  if (ctx.upstream) {
    // One compile on the origin serves every host; this host compiles only when the origin
    // cannot be asked, and uploads what it built once the origin is back.
    auto forwarded = ctx.upstream->Compile(key, body, target);
    if (forwarded) {
      ctx.upstream->NoteUse(key);
      res.set_header("X-Hlocache-Origin", forwarded->origin_cache);
      return SendArtifact(ctx, res, key, std::move(forwarded->artifact),
                          forwarded->shared ? "coalesced" : "miss");
    }
    const StatusCode code = forwarded.error().code();
    if (code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition) {
      return SendError(res, HttpStatusOf(forwarded.error()), forwarded.error().message());
    }
  }
  compiler::CompileRequest request;
  request.key = key;
  request.hlo_text = body;
  request.target = target;
  request.name = kRequestName;
  cache::ArtifactInfo info;
  info.target = target;
  info.compiler_id = compiler_id;
  info.graph_name = std::string(module->name);
  request.publish = [&ctx, &key, &info](const std::string& artifact) {
    info.compile_seconds = compiler::PeekCompileSeconds(artifact);
    auto put = ctx.store->Put(key, artifact, info);
    if (!put) {
      // The caller still gets its artifact; only the sharing is lost.
      ctx.metrics.store_errors.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr, "hlocache: serve: cannot store %s: %s\n", key.c_str(),
                   put.error().ToString().c_str());
      return;
    }
    // Before any waiter is answered: in front of a bucket, hosts that read the bucket find
    // the artifact there from now on.
    if (ctx.upstream) ctx.upstream->Publish(key);
  };
  request.find = [&ctx, &key]() -> std::optional<std::string> {
    auto found = ctx.store->Get(key);
    if (!found || !*found) return std::nullopt;
    return std::move(**found);
  };
  auto outcome = ctx.pool->Compile(request);
  if (!outcome) {
    const Status& s = outcome.error();
    int status = 500;
    switch (s.code()) {
      case StatusCode::kInvalidArgument:
        status = 400;
        break;
      case StatusCode::kFailedPrecondition:
        status = 422;
        break;
      case StatusCode::kResourceExhausted:
        status = 503;
        res.set_header("Retry-After", "5");
        break;
      case StatusCode::kDeadlineExceeded:
        status = 504;
        break;
      default:
        break;
    }
    return SendError(res, status, s.message());
  }
  if (!outcome->coalesced) {
    ctx.metrics.compile_micros.fetch_add(static_cast<uint64_t>(outcome->seconds * 1e6),
                                         std::memory_order_relaxed);
  }
  SendArtifact(ctx, res, key, std::move(outcome->artifact),
               outcome->coalesced ? "coalesced" : "miss");
}

// The body is read through a content reader whatever its Content-Type: the library would
// otherwise cap form-encoded bodies (what `curl -d` sends) at 8 KiB.
std::string ReadBody(const httplib::ContentReader& reader) {
  std::string body;
  reader([&](const char* data, size_t size) {
    body.append(data, size);
    return true;
  });
  return body;
}

}  // namespace

void RegisterCompileRoutes(httplib::Server& http, ServerContext& ctx) {
  using httplib::ContentReader;
  using httplib::Request;
  using httplib::Response;
  http.Post("/v1/compile", [&ctx](const Request& req, Response& res, const ContentReader& r) {
    HandleCompile(ctx, req, ReadBody(r), res);
  });
  http.Post("/v1/keys", [&ctx](const Request& req, Response& res, const ContentReader& r) {
    HandleKeys(ctx, req, ReadBody(r), res);
  });
  // Requests without a body never reach a content reader.
  for (const char* path : {"/v1/compile", "/v1/keys"}) {
    http.Post(path, [](const Request&, Response& res) {
      SendError(res, 400, "the body must be the HLO module's text");
    });
  }
}

}  // namespace hlocache::server
