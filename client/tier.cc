#include "client/tier.h"

#include "cache/dir_lock.h"
#include "storage/s3_backend.h"
#include "storage/store_backend.h"

namespace hlocache::client {

Result<std::unique_ptr<Tier>> MakeTier(const std::string& part, bool read_only,
                                       const storage::HttpBackendOptions& http) {
  if (part.starts_with("http://") || part.starts_with("https://")) {
    return storage::MakeHttpBackend(part, http);
  }
  if (storage::IsS3Url(part)) {
    storage::S3Options s3;
    s3.ca_cert = http.ca_cert;
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<storage::Bucket> bucket,
                              storage::MakeS3Backend(part, std::move(s3)));
    return std::unique_ptr<Tier>(std::move(bucket));
  }
  cache::StoreOptions options;
  options.read_only = read_only;
  auto store = cache::Store::Open(part, options);
  if (store) return storage::MakeStoreBackend(std::move(*store));
  // Owned by a running server: share the directory through it.
  if (store.error().code() == StatusCode::kUnavailable) {
    if (auto server = cache::ReadServerInfo(part); server && !server->listen.empty()) {
      return storage::MakeHttpBackend(server->listen, http);
    }
  }
  return Error(store.error());
}

}  // namespace hlocache::client
