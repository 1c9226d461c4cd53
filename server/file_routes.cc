// GET /v1/files/{namespace}?prefix=P&limit=N: the file artifacts a namespace holds under a
// prefix (server/file_listing.h), from the catalog; with --upstream, merged with the origin's.
#include <charconv>

#include "cache/key.h"
#include "server/context.h"
#include "server/file_listing.h"

namespace hlocache::server {
namespace {

constexpr const char* kFilesPath = R"(/v1/files/([^/]*))";
constexpr size_t kMaxPrefixBytes = 4096;

void HandleList(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string file_namespace = req.matches.size() > 1 ? req.matches[1].str() : "";
  if (Status s = cache::ValidateFileNamespace(file_namespace); !s.ok()) {
    return SendError(res, 400, s.message());
  }
  const std::string prefix = req.get_param_value("prefix");
  if (prefix.size() > kMaxPrefixBytes) return SendError(res, 400, "prefix over 4096 bytes");
  size_t limit = 0;
  if (req.has_param("limit")) {
    const std::string text = req.get_param_value("limit");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return SendError(res, 400, "limit is not a number");
    }
  }
  auto local = ListStoreFiles(*ctx.store, file_namespace, prefix, limit);
  if (!local) return SendError(res, HttpStatusOf(local.error()), local.error().message());
  std::vector<FileEntry> entries = std::move(*local);
  if (ctx.upstream) {
    // The origin's names too: a host lists what the fleet holds, not only what it fetched. An
    // origin that cannot be reached leaves the host's own names, and says so.
    auto remote = ctx.upstream->ListFiles(file_namespace, prefix, limit);
    if (remote) {
      entries = MergeFileListings(std::move(entries), std::move(*remote));
      if (limit != 0 && entries.size() > limit) entries.resize(limit);
    } else {
      res.set_header("X-Hlocache-Upstream", "unavailable");
    }
  }
  res.set_content(FormatFileListing(entries), "application/x-ndjson");
}

}  // namespace

void RegisterFileRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(kFilesPath, [&ctx](const httplib::Request& req, httplib::Response& res) {
    HandleList(ctx, req, res);
  });
}

}  // namespace hlocache::server
