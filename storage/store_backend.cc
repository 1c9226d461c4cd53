#include "storage/store_backend.h"

namespace hlocache::storage {
namespace {

class StoreBackend final : public Backend {
 public:
  explicit StoreBackend(std::unique_ptr<cache::Store> store)
      : store_(std::move(store)), name_("local " + store_->dir().string()) {}

  const std::string& name() const override { return name_; }
  bool remote() const override { return false; }

  Result<std::optional<uint64_t>> Head(std::string_view key) override {
    HLOCACHE_ASSIGN_OR_RETURN(std::optional<cache::EntryInfo> info, store_->Info(key));
    if (!info) return std::optional<uint64_t>();
    return std::optional<uint64_t>(info->size);
  }

  Result<bool> Read(std::string_view key, const ReadSink& sink) override {
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<cache::ArtifactReader> reader,
                              store_->OpenReader(key));
    if (!reader) return false;
    if (!sink.start(reader->info().size)) return true;
    for (;;) {
      HLOCACHE_ASSIGN_OR_RETURN(std::span<const char> chunk, reader->Next());
      if (chunk.empty()) return true;
      if (!sink.chunk(std::string_view(chunk.data(), chunk.size()))) return true;
    }
  }

  Status Write(std::string_view key, uint64_t size, const ChunkSource& next,
               const cache::ArtifactInfo& info) override {
    // One piece (the common case): one put, the store's fastest path.
    HLOCACHE_ASSIGN_OR_RETURN(std::string_view first, next());
    if (first.size() == size) {
      HLOCACHE_ASSIGN_OR_RETURN(std::string_view rest, next());
      if (rest.empty()) {
        HLOCACHE_ASSIGN_OR_RETURN(cache::PutOutcome outcome, store_->Put(key, first, info));
        (void)outcome;
        return Status::Ok();
      }
      return InvalidArgument("more than the " + std::to_string(size) + " bytes announced");
    }
    HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<cache::ArtifactWriter> writer,
                              store_->StartPut(key, info));
    uint64_t written = 0;
    for (std::string_view piece = first; !piece.empty();) {
      written += piece.size();
      if (written > size) {
        return InvalidArgument("more than the " + std::to_string(size) + " bytes announced");
      }
      HLOCACHE_RETURN_IF_ERROR(writer->Append(piece));
      HLOCACHE_ASSIGN_OR_RETURN(piece, next());
    }
    if (written != size) {
      return InvalidArgument(std::to_string(written) + " bytes of the " + std::to_string(size) +
                             " announced");
    }
    HLOCACHE_ASSIGN_OR_RETURN(cache::PutOutcome outcome, writer->Commit());
    (void)outcome;
    return Status::Ok();
  }

  bool CanCompile(std::string_view) const override { return false; }
  Result<RemoteCompile> Compile(std::string_view, std::string_view) override {
    return Error(FailedPrecondition(name_ + " does not compile"));
  }

 private:
  std::unique_ptr<cache::Store> store_;
  const std::string name_;
};

}  // namespace

std::unique_ptr<Backend> MakeStoreBackend(std::unique_ptr<cache::Store> store) {
  return std::make_unique<StoreBackend>(std::move(store));
}

}  // namespace hlocache::storage
