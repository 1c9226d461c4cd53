// The local tier: a store directory this process opens, or the server that owns it.
#include "cache/dir_lock.h"
#include "client/tier.h"

namespace hlocache::client {
namespace {

class LocalTier final : public Tier {
 public:
  LocalTier(std::unique_ptr<cache::Store> store, std::string name)
      : store_(std::move(store)), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  bool remote() const override { return false; }

  Result<std::optional<std::string>> Get(std::string_view key) override { return store_->Get(key); }
  Status Put(std::string_view key, std::string_view bytes,
             const cache::ArtifactInfo& info) override {
    auto put = store_->Put(key, bytes, info);
    return put ? Status::Ok() : put.error();
  }
  bool CanCompile(std::string_view) const override { return false; }
  Result<RemoteCompile> Compile(std::string_view, std::string_view) override {
    return Error(FailedPrecondition(name_ + " does not compile"));
  }

 private:
  std::unique_ptr<cache::Store> store_;
  std::string name_;
};

}  // namespace

Result<std::unique_ptr<Tier>> MakeDirectoryTier(const std::string& dir, bool read_only,
                                                const HttpTierOptions& http_options) {
  cache::StoreOptions options;
  options.read_only = read_only;
  auto store = cache::Store::Open(dir, options);
  if (store) return std::unique_ptr<Tier>(new LocalTier(std::move(*store), "local " + dir));
  // Owned by a running server: share the directory through it.
  if (store.error().code() == StatusCode::kUnavailable) {
    if (auto server = cache::ReadServerInfo(dir); server && !server->listen.empty()) {
      return MakeHttpTier(server->listen, http_options);
    }
  }
  return Error(store.error());
}

}  // namespace hlocache::client
