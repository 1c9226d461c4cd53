#include "client/cache.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/tier.h"
#include "common/comma_list.h"
#include "compiler/artifact/container.h"
#include "compiler/build.h"
#include "compiler/hlo/parser.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "compiler/worker_pool.h"
#include "keying/keying.h"
#include "storage/availability.h"

namespace hlocache::client {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Loaded executables, least recently used first out, bounded by their artifacts' bytes.
class MemoryLru {
 public:
  explicit MemoryLru(uint64_t capacity) : capacity_(capacity) {}

  // The executable and its artifact, or two nulls.
  std::pair<std::shared_ptr<const compiler::LoadedExecutable>, std::shared_ptr<const std::string>>
  Get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return {};
    order_.splice(order_.begin(), order_, it->second);
    return {it->second->executable, it->second->artifact};
  }

  void Put(const std::string& key, std::shared_ptr<const compiler::LoadedExecutable> exe,
           std::shared_ptr<const std::string> artifact) {
    const uint64_t bytes = artifact->size();
    if (capacity_ == 0 || bytes > capacity_) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key)) return;
    order_.push_front({key, std::move(exe), std::move(artifact), bytes});
    index_[key] = order_.begin();
    used_ += bytes;
    while (used_ > capacity_) {
      used_ -= order_.back().bytes;
      index_.erase(order_.back().key);
      order_.pop_back();
    }
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const compiler::LoadedExecutable> executable;
    std::shared_ptr<const std::string> artifact;
    uint64_t bytes;
  };
  const uint64_t capacity_;
  std::mutex mu_;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t used_ = 0;
};

struct TierSlot {
  TierSlot(std::unique_ptr<Tier> t, BackoffOptions options, storage::Availability::Log log)
      : tier(std::move(t)), availability("cache tier " + tier->name(), options, std::move(log)) {}
  std::unique_ptr<Tier> tier;
  storage::Availability availability;  // Rests after failures in a row; a success ends it.
};

class CacheImpl final : public Cache {
 public:
  CacheImpl(std::string spec, CacheOptions options)
      : spec_(std::move(spec)), options_(std::move(options)), memory_(options_.memory_bytes) {}

  ~CacheImpl() override {
    Flush();
    {
      std::lock_guard<std::mutex> lock(upload_mu_);
      stopping_ = true;
    }
    upload_cv_.notify_all();
    if (uploader_.joinable()) uploader_.join();
  }

  Status Init();
  Result<Executable> GetOrCompile(std::string_view hlo_text, std::string_view target) override;
  Result<Executable> GetOrCompile(const hlo::Module& module, std::string_view target) override;
  void Flush() override;
  Status Put(std::string_view key, std::string_view artifact) override;
  CacheStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }
  const std::string& spec() const override { return spec_; }

 private:
  struct Upload {
    size_t tier;
    std::string key;
    std::shared_ptr<const std::string> bytes;
    cache::ArtifactInfo info;
  };

  keying::KeySettings KeySettingsFor(std::string_view target) const;
  // GetOrCompile once the module is keyed; `start`: when the ask began.
  Result<Executable> GetOrCompileKeyed(const hlo::Module& module, const keying::KeyedModule& keyed,
                                       Clock::time_point start);
  Result<Executable> Lookup(const std::string& key, const hlo::Module& module,
                            const std::string& target);
  // The verified, loaded artifact; an error says why it was dropped.
  Result<std::shared_ptr<const compiler::LoadedExecutable>> Verify(const std::string& key,
                                                                   std::string_view bytes);
  Result<std::string> CompileHere(const std::string& key, const hlo::Module& module,
                                  const std::string& target);
  bool IsUp(TierSlot& slot) const { return slot.availability.Admit(); }
  // Tells every tier of a hit, whichever tier it came from (a bucket marks it for gc).
  void NoteUse(const std::string& key) {
    for (auto& slot : tiers_) slot->tier->NoteUse(key);
  }
  // Counts a tier's failure, and lets it rest when it could not be reached.
  void MarkDown(TierSlot& slot, const Status& why);
  void WriteBack(const std::vector<size_t>& tiers, const std::string& key,
                 std::shared_ptr<const std::string> bytes, const cache::ArtifactInfo& info,
                 double compile_seconds);
  void UploadLoop();
  void Note(const std::string& line) const { options_.log(line); }
  template <typename F>
  void Count(F f) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    f(stats_);
  }

  const std::string spec_;
  CacheOptions options_;
  std::vector<std::unique_ptr<TierSlot>> tiers_;
  MemoryLru memory_;
  std::optional<compiler::Toolchain> toolchain_;
  std::string toolchain_error_;
  std::string compiler_id_;
  std::unique_ptr<compiler::WorkerPool> pool_;

  // The keys of texts asked for before: XXH3-128 of the exact text, mixed with the target.
  struct TextId {
    uint64_t low, high;
    bool operator==(const TextId&) const = default;
  };
  struct TextIdHash {
    size_t operator()(const TextId& id) const { return static_cast<size_t>(id.low); }
  };
  static TextId IdOf(std::string_view text, std::string_view target) {
    const XXH128_hash_t h =
        XXH3_128bits_withSeed(text.data(), text.size(), XXH3_64bits(target.data(), target.size()));
    return {h.low64, h.high64};
  }
  static constexpr size_t kMostRememberedKeys = 4096;
  std::mutex keys_mu_;
  std::unordered_map<TextId, std::string, TextIdHash> keys_;

  // In-process single flight: one lookup and compile per key at a time.
  std::mutex flights_mu_;
  std::map<std::string, std::shared_future<Result<Executable>>> flights_;

  std::mutex upload_mu_;
  std::condition_variable upload_cv_;
  std::deque<Upload> uploads_;
  size_t uploads_running_ = 0;
  bool stopping_ = false;
  std::thread uploader_;

  mutable std::mutex stats_mu_;
  CacheStats stats_;
};

Status CacheImpl::Init() {
  if (!options_.log) {
    options_.log = [](std::string_view line) {
      std::fprintf(stderr, "hlocache: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  storage::HttpBackendOptions http;
  http.token = options_.token;
  http.ca_cert = options_.ca_cert;
  http.connect_timeout = options_.connect_timeout;
  http.io_timeout = options_.request_timeout;
  http.compile_timeout = options_.compile_timeout;
  for (const std::string& part : SplitCacheSpec(spec_)) {
    Result<std::unique_ptr<Tier>> tier = MakeTier(part, options_.read_only, http);
    if (!tier) {
      if (tier.error().code() == StatusCode::kInvalidArgument) return tier.error();
      Note("cache tier " + part + " skipped: " + tier.error().message());
      continue;
    }
    tiers_.push_back(
        std::make_unique<TierSlot>(std::move(*tier), options_.backoff,
                                   [this](std::string_view line) { Note(std::string(line)); }));
  }
  compiler::ToolchainOptions toolchain_options;
  toolchain_options.cxx = options_.cxx;
  toolchain_options.timeout = options_.compile_timeout;
  auto toolchain = compiler::Toolchain::Probe(toolchain_options);
  if (toolchain) {
    compiler_id_ = toolchain->CompilerId();
    toolchain_.emplace(std::move(*toolchain));
  } else {
    // Keys still name the default toolchain, so servers that have one can serve this process.
    compiler_id_ = compiler::DefaultCompilerId();
    toolchain_error_ = toolchain.error().message();
  }
  if (!options_.worker_binary.empty() && toolchain_) {
    compiler::WorkerPoolOptions pool_options;
    pool_options.worker_binary = options_.worker_binary;
    pool_options.worker_args = {"--cxx", toolchain_->cxx_path().string()};
    pool_options.timeout = options_.compile_timeout;
    pool_options.workers = std::max<size_t>(options_.compile_workers, 1);
    pool_ = std::make_unique<compiler::WorkerPool>(std::move(pool_options));
  }
  uploader_ = std::thread([this] { UploadLoop(); });
  return Status::Ok();
}

void CacheImpl::MarkDown(TierSlot& slot, const Status& why) {
  Count([](CacheStats& s) { ++s.tier_errors; });
  (void)slot.availability.Record(why);
}

Result<std::shared_ptr<const compiler::LoadedExecutable>> CacheImpl::Verify(
    const std::string& key, std::string_view bytes) {
  HLOCACHE_ASSIGN_OR_RETURN(compiler::DecodedArtifact decoded, compiler::DecodeArtifact(bytes));
  if (decoded.header.key != key) {
    return Error(DataLoss("the artifact was built for key " + decoded.header.key));
  }
  if (!compiler::RunsOnHost(decoded.header.target)) {
    return std::shared_ptr<const compiler::LoadedExecutable>();  // Checked, not loadable here.
  }
  auto loaded = compiler::LoadedExecutable::Load(bytes);
  if (!loaded) return Error(loaded.error());
  if ((*loaded)->header().key != key) {
    return Error(DataLoss("the artifact was built for key " + (*loaded)->header().key));
  }
  return std::shared_ptr<const compiler::LoadedExecutable>(std::move(*loaded));
}

Result<std::string> CacheImpl::CompileHere(const std::string& key, const hlo::Module& module,
                                           const std::string& target) {
  if (!toolchain_) {
    return Error(FailedPrecondition("no C++ toolchain to compile with: " + toolchain_error_));
  }
  if (pool_) {
    compiler::CompileRequest request;
    request.key = key;
    request.hlo_text = std::string(module.source());
    request.target = target;
    request.name = std::string(module.filename());
    HLOCACHE_ASSIGN_OR_RETURN(compiler::CompileOutcome outcome, pool_->Compile(request));
    return std::move(outcome.artifact);
  }
  return compiler::BuildArtifact(module, *toolchain_, {key, target});
}

Result<Executable> CacheImpl::GetOrCompile(std::string_view hlo_text, std::string_view target) {
  const auto start = Clock::now();
  const TextId id = IdOf(hlo_text, target);
  std::string key;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    if (auto it = keys_.find(id); it != keys_.end()) key = it->second;
  }
  if (!key.empty()) {
    if (auto [exe, artifact] = memory_.Get(key); exe) {
      Count([](CacheStats& s) {
        ++s.requests;
        ++s.memory_hits;
        ++s.keys_memoized;
      });
      NoteUse(key);
      Executable out;
      out.key = std::move(key);
      out.executable = std::move(exe);
      out.artifact = std::move(artifact);
      out.source = Source::kMemory;
      out.total_seconds = SecondsSince(start);
      return out;
    }
  }
  // Parsed and keyed at once (the canonical form built beside the parser): a large module's
  // first ask pays about three quarters of parsing then keying.
  Count([](CacheStats& s) { ++s.requests; });
  auto parsed = keying::ParseAndKey(std::string(hlo_text), "module", KeySettingsFor(target));
  if (!parsed) return Error(parsed.error());
  Result<Executable> result = GetOrCompileKeyed(parsed->module, parsed->keyed, start);
  if (result) {
    std::lock_guard<std::mutex> lock(keys_mu_);
    if (keys_.size() >= kMostRememberedKeys) keys_.clear();  // Rebuilt by the next asks.
    keys_.emplace(id, result->key);
  }
  return result;
}

keying::KeySettings CacheImpl::KeySettingsFor(std::string_view target) const {
  keying::KeySettings settings;
  settings.target = std::string(target);
  settings.compiler_id = compiler::CompilerIdFor(target, compiler_id_);
  return settings;
}

Result<Executable> CacheImpl::GetOrCompile(const hlo::Module& module, std::string_view target) {
  const auto start = Clock::now();
  Count([](CacheStats& s) { ++s.requests; });
  HLOCACHE_ASSIGN_OR_RETURN(keying::KeyedModule keyed,
                            keying::KeyModule(module, KeySettingsFor(target)));
  return GetOrCompileKeyed(module, keyed, start);
}

Result<Executable> CacheImpl::GetOrCompileKeyed(const hlo::Module& module,
                                                const keying::KeyedModule& keyed,
                                                Clock::time_point start) {
  const std::string& key = keyed.key.text;

  if (auto [exe, artifact] = memory_.Get(key); exe) {
    Count([](CacheStats& s) { ++s.memory_hits; });
    NoteUse(key);
    Executable out;
    out.key = key;
    out.executable = std::move(exe);
    out.artifact = std::move(artifact);
    out.source = Source::kMemory;
    out.total_seconds = SecondsSince(start);
    return out;
  }
  // One lookup per key in this process at a time; later callers share the first one's result.
  std::promise<Result<Executable>> promise;
  std::shared_future<Result<Executable>> shared;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(flights_mu_);
    auto it = flights_.find(key);
    if (it != flights_.end()) {
      shared = it->second;
    } else {
      shared = promise.get_future().share();
      flights_.emplace(key, shared);
      leader = true;
    }
  }
  if (!leader) {
    Result<Executable> result = shared.get();
    if (result) {
      result->source = Source::kMemory;
      result->total_seconds = SecondsSince(start);
    }
    return result;
  }
  Result<Executable> result = Lookup(key, module, keyed.target);
  if (result) result->total_seconds = SecondsSince(start);
  promise.set_value(result);
  {
    std::lock_guard<std::mutex> lock(flights_mu_);
    flights_.erase(key);
  }
  return result;
}

Result<Executable> CacheImpl::Lookup(const std::string& key, const hlo::Module& module,
                                     const std::string& target) {
  Executable out;
  out.key = key;
  std::vector<size_t> missed;  // Tiers to write the artifact back to.
  const auto lookup_start = Clock::now();
  auto finish = [&](std::shared_ptr<const compiler::LoadedExecutable> exe,
                    std::shared_ptr<const std::string> bytes, double compile_seconds) {
    cache::ArtifactInfo info;
    if (auto header = compiler::PeekArtifactHeader(*bytes)) {
      info.target = header->target;
      info.compiler_id = header->compiler_id;
      info.compile_seconds = header->compile_seconds;
    }
    info.graph_name = std::string(module.name);
    if (exe) memory_.Put(key, exe, bytes);
    WriteBack(missed, key, bytes, info, compile_seconds);
    out.executable = std::move(exe);
    out.artifact = std::move(bytes);
    return out;
  };

  for (size_t i = 0; i < tiers_.size(); ++i) {
    TierSlot& slot = *tiers_[i];
    if (!IsUp(slot)) continue;
    auto got = slot.tier->Get(key);
    if (!got) {
      MarkDown(slot, got.error());
      continue;
    }
    (void)slot.availability.Record(Status::Ok());
    if (!*got) {
      missed.push_back(i);
      continue;
    }
    auto exe = Verify(key, **got);
    if (!exe) {
      Count([](CacheStats& s) { ++s.corrupt_dropped; });
      Note("dropped a bad artifact for " + key + " from " + slot.tier->name() + ": " +
           exe.error().message());
      missed.push_back(i);
      continue;
    }
    Count([](CacheStats& s) { ++s.tier_hits; });
    NoteUse(key);
    out.source = slot.tier->remote() ? Source::kRemote : Source::kLocal;
    out.tier = slot.tier->name();
    out.lookup_seconds = SecondsSince(lookup_start);
    return finish(std::move(*exe), std::make_shared<const std::string>(std::move(**got)), 0);
  }
  out.lookup_seconds = SecondsSince(lookup_start);

  // Nowhere: the first server that builds this target compiles it (and keeps it).
  const auto compile_start = Clock::now();
  for (size_t i = 0; i < tiers_.size(); ++i) {
    TierSlot& slot = *tiers_[i];
    if (!slot.tier->remote() || !IsUp(slot) || !slot.tier->CanCompile(target)) continue;
    auto compiled = slot.tier->Compile(module.source(), target);
    if (!compiled) {
      const StatusCode code = compiled.error().code();
      // The module's fault or the server's policy: the server stays in use.
      if (code != StatusCode::kFailedPrecondition && code != StatusCode::kInvalidArgument &&
          code != StatusCode::kPermissionDenied) {
        MarkDown(slot, compiled.error());
      }
      continue;
    }
    auto exe = Verify(key, compiled->artifact);
    if (!exe) {
      Count([](CacheStats& s) { ++s.corrupt_dropped; });
      Note("dropped a bad artifact for " + key + " compiled by " + slot.tier->name() + ": " +
           exe.error().message());
      continue;
    }
    Count([](CacheStats& s) { ++s.server_compiles; });
    std::erase(missed, i);  // The server keeps what it compiled.
    out.source = Source::kCompiledByServer;
    out.tier = slot.tier->name();
    out.compile_seconds = SecondsSince(compile_start);
    const double server_seconds = compiler::PeekCompileSeconds(compiled->artifact);
    return finish(std::move(*exe),
                  std::make_shared<const std::string>(std::move(compiled->artifact)),
                  server_seconds);
  }

  // No server could: compile here.
  const auto here_start = Clock::now();
  HLOCACHE_ASSIGN_OR_RETURN(std::string artifact, CompileHere(key, module, target));
  out.compile_seconds = SecondsSince(here_start);
  auto exe = Verify(key, artifact);
  if (!exe) return Error(exe.error());
  Count([](CacheStats& s) { ++s.local_compiles; });
  out.source = Source::kCompiledHere;
  return finish(std::move(*exe), std::make_shared<const std::string>(std::move(artifact)),
                out.compile_seconds);
}

void CacheImpl::WriteBack(const std::vector<size_t>& tiers, const std::string& key,
                          std::shared_ptr<const std::string> bytes, const cache::ArtifactInfo& info,
                          double compile_seconds) {
  if (options_.read_only || tiers.empty()) return;
  if (compile_seconds > 0 && compile_seconds < options_.min_compile_seconds) return;
  std::lock_guard<std::mutex> lock(upload_mu_);
  for (size_t tier : tiers) {
    if (uploads_.size() >= 256) {
      Note("upload queue full: " + key + " is not written back");
      break;
    }
    uploads_.push_back({tier, key, bytes, info});
  }
  upload_cv_.notify_all();
}

void CacheImpl::UploadLoop() {
  std::unique_lock<std::mutex> lock(upload_mu_);
  while (true) {
    upload_cv_.wait(lock, [&] { return stopping_ || !uploads_.empty(); });
    if (uploads_.empty()) {
      if (stopping_) return;
      continue;
    }
    Upload job = std::move(uploads_.front());
    uploads_.pop_front();
    ++uploads_running_;
    lock.unlock();
    TierSlot& slot = *tiers_[job.tier];
    const bool tried = IsUp(slot);
    Status s = tried ? slot.tier->Put(job.key, *job.bytes, job.info) : slot.availability.Resting();
    if (s.ok()) {
      (void)slot.availability.Record(s);
      Count([](CacheStats& st) { ++st.uploads; });
    } else {
      Count([](CacheStats& st) { ++st.upload_failures; });
      if (tried && s.code() == StatusCode::kUnavailable) MarkDown(slot, s);
    }
    lock.lock();
    --uploads_running_;
    upload_cv_.notify_all();
  }
}

Status CacheImpl::Put(std::string_view key, std::string_view artifact) {
  if (options_.read_only) return PermissionDenied("the cache is read-only");
  HLOCACHE_ASSIGN_OR_RETURN(compiler::DecodedArtifact decoded, compiler::DecodeArtifact(artifact));
  if (decoded.header.key != key) {
    return DataLoss("the artifact was built for key " + decoded.header.key + ", not " +
                    std::string(key));
  }
  cache::ArtifactInfo info;
  info.target = decoded.header.target;
  info.compiler_id = decoded.header.compiler_id;
  info.compile_seconds = decoded.header.compile_seconds;
  int stored = 0;
  std::string last_error = "no tiers";
  for (auto& slot : tiers_) {
    if (!IsUp(*slot)) continue;
    Status s = slot->tier->Put(key, artifact, info);
    if (s.ok()) {
      ++stored;
    } else {
      last_error = s.message();
      MarkDown(*slot, s);
    }
  }
  if (stored == 0) return Unavailable("no cache tier took " + std::string(key) + ": " + last_error);
  return Status::Ok();
}

void CacheImpl::Flush() {
  std::unique_lock<std::mutex> lock(upload_mu_);
  upload_cv_.wait(lock, [&] { return uploads_.empty() && uploads_running_ == 0; });
}

std::mutex g_global_mu;
std::unique_ptr<Cache> g_global;

// Closes the process-wide cache at exit, before the static objects that were made while it
// opened are destroyed (handlers run in the reverse order of their registration), so its
// pending uploads finish and its store closes cleanly.
void CloseGlobalCache() {
  std::unique_ptr<Cache> cache;
  {
    std::lock_guard<std::mutex> lock(g_global_mu);
    cache = std::move(g_global);
  }
}

}  // namespace

std::vector<std::string> SplitCacheSpec(const std::string& spec) { return SplitCommaList(spec); }

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kMemory:
      return "memory";
    case Source::kLocal:
      return "local";
    case Source::kRemote:
      return "remote";
    case Source::kCompiledHere:
      return "compiled here";
    case Source::kCompiledByServer:
      return "compiled by the server";
  }
  return "unknown";
}

CacheOptions CacheOptions::FromEnvironment() {
  CacheOptions options;
  if (const char* ro = std::getenv("HLOCACHE_READONLY")) {
    options.read_only = std::string(ro) == "1" || std::string(ro) == "true";
  }
  if (const char* token = std::getenv("HLOCACHE_TOKEN")) options.token = token;
  if (const char* ca = std::getenv("HLOCACHE_CA_CERT")) options.ca_cert = ca;
  return options;
}

Result<std::unique_ptr<Cache>> Cache::Open(const std::string& spec, CacheOptions options) {
  auto cache = std::make_unique<CacheImpl>(spec, std::move(options));
  HLOCACHE_RETURN_IF_ERROR(cache->Init());
  return std::unique_ptr<Cache>(std::move(cache));
}

Status initialize_cache(const std::string& spec_in, CacheOptions options) {
  std::string spec = spec_in;
  if (spec.empty()) {
    const char* env = std::getenv("HLOCACHE");
    spec = env ? env : "";
  }
  std::lock_guard<std::mutex> lock(g_global_mu);
  if (g_global) {
    if (g_global->spec() == spec) return Status::Ok();
    return FailedPrecondition("the cache is already initialized with '" + g_global->spec() +
                              "'; it cannot change to '" + spec + "'");
  }
  HLOCACHE_ASSIGN_OR_RETURN(g_global, Cache::Open(spec, std::move(options)));
  std::atexit(CloseGlobalCache);
  return Status::Ok();
}

Cache* global_cache() {
  std::lock_guard<std::mutex> lock(g_global_mu);
  return g_global.get();
}

}  // namespace hlocache::client
