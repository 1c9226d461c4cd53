#include "storage/s3_backend.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/key.h"
#include "common/fast_hash.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "storage/s3_connection.h"

namespace hlocache::storage {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// S3's rules for bucket names: 3 to 63 lowercase letters, digits, dots and hyphens, starting
// and ending with a letter or digit.
bool IsBucketName(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (const char c : b) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-')) {
      return false;
    }
  }
  return std::isalnum(static_cast<unsigned char>(b.front())) &&
         std::isalnum(static_cast<unsigned char>(b.back()));
}

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// Two hex digits that spread keys over 256 prefixes: the digest's first two (keys are "v1-"
// and hex), else those of an XXH3 of the key.
std::string ShardOf(std::string_view key) {
  const size_t dash = key.find('-');
  if (dash != std::string_view::npos && key.size() >= dash + 3 && IsHex(key[dash + 1]) &&
      IsHex(key[dash + 2])) {
    std::string s(key.substr(dash + 1, 2));
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  return Hex128(key.data(), key.size()).substr(0, 2);
}

bool IsRetryable(int status) {
  return status == 500 || status == 502 || status == 503 || status == 504;
}

std::chrono::milliseconds Jittered(std::chrono::milliseconds pause) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> d(pause.count() / 2, pause.count());
  return std::chrono::milliseconds(d(rng));
}

// The five entities XML escapes (S3 escapes object keys in listings).
std::string XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '&') {
      static constexpr std::pair<std::string_view, char> kEntities[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool replaced = false;
      for (const auto& [entity, c] : kEntities) {
        if (text.substr(i, entity.size()) == entity) {
          out += c;
          i += entity.size() - 1;
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out += text[i];
  }
  return out;
}

// Calls `each` with the inside of every <tag>...</tag> of `xml`, in order.
template <typename F>
void ForEachElement(std::string_view xml, std::string_view tag, F each) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t at = 0;
  while ((at = xml.find(open, at)) != std::string_view::npos) {
    const size_t start = at + open.size();
    const size_t end = xml.find(close, start);
    if (end == std::string_view::npos) return;
    each(xml.substr(start, end - start));
    at = end + close.size();
  }
}

class S3Backend final : public Bucket {
 public:
  S3Backend(std::string name, std::string bucket_url, std::string prefix, S3Options options,
            S3ConnectionOptions connection)
      : name_(std::move(name)),
        bucket_url_(std::move(bucket_url)),
        prefix_(std::move(prefix)),
        options_(std::move(options)),
        pool_(connection),
        marks_pool_(MarkConnection(std::move(connection))) {}

  ~S3Backend() override {
    {
      std::lock_guard<std::mutex> lock(marks_mu_);
      stopping_ = true;
    }
    marks_changed_.notify_all();
    if (marker_.joinable()) marker_.join();
  }

  void NoteUse(std::string_view key) override;
  Result<std::vector<BucketEntry>> ListEntries() override;
  Status Delete(const BucketEntry& entry) override;
  Result<std::vector<BucketFile>> ListFiles(std::string_view file_namespace,
                                            std::string_view prefix, size_t limit) override;
  void FlushMarks() override {
    std::unique_lock<std::mutex> lock(marks_mu_);
    marks_changed_.wait(lock, [&] { return marks_.empty() && !marking_; });
  }

  const std::string& name() const override { return name_; }
  bool remote() const override { return true; }
  bool CanCompile(std::string_view) const override { return false; }
  Result<RemoteCompile> Compile(std::string_view, std::string_view) override {
    return Error(FailedPrecondition(name_ + " is a bucket: it compiles nothing"));
  }

  Result<std::optional<uint64_t>> Head(std::string_view key) override {
    S3Request request;
    request.method = "HEAD";
    request.url = ObjectUrl(key);
    HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(request, nullptr));
    if (reply.status == 404) return std::optional<uint64_t>();
    if (reply.status != 200) return Error(RefusedHead(reply, key));
    return std::optional<uint64_t>(reply.content_length.value_or(0));
  }

  Result<bool> Read(std::string_view key, const ReadSink& sink) override;

  RequestStats request_stats() const override {
    RequestStats s;
    s.kept = true;
    auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.requests = load(requests_);
    s.retries = load(retries_);
    s.bytes_sent = load(bytes_sent_);
    s.bytes_received = load(bytes_received_);
    s.latency_micros = load(latency_micros_);
    s.errors_unavailable = load(errors_unavailable_);
    s.throttled = load(throttled_);
    s.errors_denied = load(errors_denied_);
    s.errors_refused = load(errors_refused_);
    return s;
  }

  Status Write(std::string_view key, uint64_t size, const ChunkSource& next,
               const cache::ArtifactInfo& info) override;

 private:
  std::string ObjectUrl(std::string_view key) const {
    std::string object = prefix_.empty() ? "" : prefix_ + "/";
    object += ShardOf(key) + "/" + std::string(key);
    return bucket_url_ + "/" + UriEncode(object, /*keep_slash=*/true);
  }
  // Where `key`'s use mark is: PREFIX/access/<shard>/<key> ("access" is no shard: two hex
  // digits).
  std::string MarkUrl(std::string_view key) const {
    std::string object = prefix_.empty() ? "" : prefix_ + "/";
    object += std::string(kMarks) + ShardOf(key) + "/" + std::string(key);
    return bucket_url_ + "/" + UriEncode(object, /*keep_slash=*/true);
  }
  static constexpr std::string_view kMarks = "access/";
  static constexpr std::string_view kFiles = "files/";
  std::string Root() const { return prefix_.empty() ? "" : prefix_ + "/"; }
  std::string UrlOf(std::string_view object) const {
    return bucket_url_ + "/" + UriEncode(object, /*keep_slash=*/true);
  }
  // Calls `each(name, last_modified, size)` for every object whose name starts with `start`
  // (ListObjectsV2, every page); stops after `most` (0: every).
  Status ListObjects(
      const std::string& start, size_t most,
      const std::function<void(std::string_view name, std::chrono::system_clock::time_point when,
                               uint64_t size)>& each);
  // Writes the name index of a file artifact just written, and removes its stale ones.
  Status IndexFile(std::string_view key, const compiler::ArtifactHeader& header, uint64_t size);
  Status DeleteObject(const std::string& url, std::string_view what);

  void RunMarker();

  // Sends `request`, again after a pause when it had no answer or a 5xx one, unless
  // `delivered` says part of its body reached the caller already.
  // `pool` and `attempts` (0: options_.attempts) are the use marks' own.
  Result<S3Reply> Send(const S3Request& request, const bool* delivered,
                       S3ConnectionPool* pool = nullptr, int attempts = 0) {
    if (pool == nullptr) pool = &pool_;
    if (attempts == 0) attempts = options_.attempts;
    Status last = Status::Ok();
    std::chrono::milliseconds pause = options_.retry_pause;
    for (int attempt = 0; attempt < std::max(1, attempts); ++attempt) {
      if (attempt > 0) {
        if (delivered != nullptr && *delivered) break;
        std::this_thread::sleep_for(Jittered(pause));
        pause *= 2;
        Add(retries_, 1);
      }
      std::unique_ptr<S3Connection> connection = pool->Take();
      const auto start = std::chrono::steady_clock::now();
      Result<S3Reply> reply = connection->Perform(request);
      Add(requests_, 1);
      Add(latency_micros_,
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count()));
      Add(bytes_sent_, request.body.size());
      if (!reply) {
        last = reply.error();  // The connection is dropped with its broken transfer.
        continue;
      }
      Add(bytes_received_, reply->body.size());
      if (!reply->stopped) pool->GiveBack(std::move(connection));
      if (reply->status == 503) Add(throttled_, 1);
      if (IsRetryable(reply->status) && !reply->stopped) {
        const std::string code = XmlElement(reply->body, "Code");
        last = Unavailable(request.method + " " + request.url + ": " +
                           std::to_string(reply->status) + (code.empty() ? "" : " " + code));
        continue;
      }
      if (reply->status == 401 || reply->status == 403) {
        Add(errors_denied_, 1);
      } else if (reply->status >= 400 && reply->status != 404) {
        Add(errors_refused_, 1);
      }
      return reply;
    }
    Add(errors_unavailable_, 1);
    return Error(Unavailable(name_ + ": " + last.message()));
  }

  static void Add(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }

  // The error for an answer that is neither success nor "not found".
  Status Refused(const S3Reply& reply, std::string_view what, std::string_view key) const {
    const std::string code = XmlElement(reply.body, "Code");
    const std::string why = std::string(what) + " " + std::string(key) + " answered " +
                            std::to_string(reply.status) + (code.empty() ? "" : " " + code);
    if (reply.status == 401 || reply.status == 403) {
      return PermissionDenied(name_ + ": " + why +
                              " (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                              "AWS_SESSION_TOKEN)");
    }
    if (code == "NoSuchBucket") return FailedPrecondition(name_ + ": no such bucket");
    if (reply.status >= 500) return Unavailable(name_ + ": " + why);
    return InvalidArgument(name_ + ": " + why);
  }

  // A HEAD's answer has no body to say why it was refused: a GET of one byte says it.
  Status RefusedHead(const S3Reply& head, std::string_view key) {
    if (head.status == 401 || head.status == 403) {
      S3Request probe;
      probe.url = ObjectUrl(key);
      probe.headers.emplace_back("Range", "bytes=0-0");
      if (auto reply = Send(probe, nullptr); reply && reply->status == head.status) {
        return Refused(*reply, "HEAD", key);
      }
    }
    return Refused(head, "HEAD", key);
  }

  Status WriteWhole(std::string_view key, std::string bytes);
  Status WriteMultipart(std::string_view key, uint64_t size, const ChunkSource& next);
  Result<std::string> ReadRange(const std::string& url, const std::string& etag,
                                std::string_view key, uint64_t first, uint64_t last);

  const std::string name_;
  const std::string bucket_url_;  // ENDPOINT/BUCKET, or https://BUCKET.s3.REGION.amazonaws.com.
  const std::string prefix_;      // Without slashes at its ends; may be empty.
  const S3Options options_;
  S3ConnectionPool pool_;
  // The use marks' connections: short waits, since a process that exits waits for the mark
  // being written (at most about 3 s with a gateway that stopped answering).
  S3ConnectionPool marks_pool_;
  static S3ConnectionOptions MarkConnection(S3ConnectionOptions o) {
    o.connect_timeout = std::min(o.connect_timeout, std::chrono::milliseconds(1000));
    o.stall_timeout = std::min(o.stall_timeout, std::chrono::milliseconds(2000));
    return o;
  }
  std::atomic<uint64_t> requests_{0}, retries_{0}, bytes_sent_{0}, bytes_received_{0},
      latency_micros_{0}, errors_unavailable_{0}, throttled_{0}, errors_denied_{0},
      errors_refused_{0};

  // Use marks waiting to be written, by a thread started with the first.
  static constexpr size_t kMostQueuedMarks = 10000;
  std::mutex marks_mu_;
  std::condition_variable marks_changed_;
  std::deque<std::string> marks_;
  // Looked up by string_view: a use already marked within the hour (every hit of a hot key)
  // allocates nothing.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::chrono::steady_clock::time_point, KeyHash, std::equal_to<>>
      marked_;
  bool marking_ = false;        // A mark is being written.
  bool marks_failed_ = false;   // One failure was said; later ones are not.
  bool marks_refused_ = false;  // 401/403: credentials that may only read; no more marks.
  bool stopping_ = false;
  std::thread marker_;
};

void S3Backend::NoteUse(std::string_view key) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(marks_mu_);
  if (stopping_ || marks_refused_) return;
  if (auto it = marked_.find(key); it != marked_.end()) {
    if (now - it->second < options_.mark_interval) return;
    it->second = now;
  } else {
    marked_.emplace(key, now);
  }
  if (marks_.size() >= kMostQueuedMarks) return;  // Dropped: gc sees an older use.
  if (marked_.size() > 4 * kMostQueuedMarks) {
    // Forget keys marked long ago (they are marked again on their next use).
    std::erase_if(marked_, [&](const auto& m) { return now - m.second >= options_.mark_interval; });
  }
  marks_.emplace_back(key);
  if (!marker_.joinable()) marker_ = std::thread([this] { RunMarker(); });
  marks_changed_.notify_all();
}

void S3Backend::RunMarker() {
  std::unique_lock<std::mutex> lock(marks_mu_);
  while (true) {
    marks_changed_.wait(lock, [&] { return stopping_ || !marks_.empty(); });
    if (stopping_) break;  // Marks still queued are dropped: stopping must not wait on S3.
    const std::string key = std::move(marks_.front());
    marks_.pop_front();
    marking_ = true;
    lock.unlock();
    S3Request put;
    put.method = "PUT";
    put.url = MarkUrl(key);
    put.headers = {{"Content-Type", "application/octet-stream"}};
    auto reply = Send(put, nullptr, &marks_pool_, /*attempts=*/1);
    const bool refused = reply && (reply->status == 401 || reply->status == 403);
    const bool failed = !reply || reply->status != 200;
    lock.lock();
    if (failed && !marks_failed_) {
      // Once: marks are best effort, and a gateway that is down would say so for every key.
      marks_failed_ = true;
      std::fprintf(stderr, "hlocache: %s: uses not marked for gc (%s)%s\n", name_.c_str(),
                   reply ? ("PUT answered " + std::to_string(reply->status)).c_str()
                         : reply.error().message().c_str(),
                   refused ? "; these credentials may not write: no more marks" : "");
    }
    if (refused) {
      marks_refused_ = true;
      marks_.clear();
    }
    marking_ = false;
    marks_changed_.notify_all();
  }
  marks_.clear();
  marks_changed_.notify_all();
}

Status S3Backend::ListObjects(
    const std::string& start, size_t most,
    const std::function<void(std::string_view, std::chrono::system_clock::time_point, uint64_t)>&
        each) {
  std::string token;
  size_t seen = 0;
  while (true) {
    std::vector<std::pair<std::string, std::string>> params = {
        {"list-type", "2"}, {"max-keys", std::to_string(options_.list_page)}, {"prefix", start}};
    if (!token.empty()) params.emplace_back("continuation-token", token);
    S3Request list;
    list.url = bucket_url_;
    list.query = CanonicalQuery(std::move(params));
    HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(list, nullptr));
    if (reply.status != 200) return Refused(reply, "listing", start.empty() ? "/" : start);
    Status malformed = Status::Ok();
    ForEachElement(reply.body, "Contents", [&](std::string_view item) {
      if (!malformed.ok() || (most != 0 && seen >= most)) return;
      const std::string name = XmlUnescape(XmlElement(item, "Key"));
      const auto when = ParseS3Time(XmlElement(item, "LastModified"));
      if (!name.starts_with(start) || !when) {
        malformed = Unavailable(name_ + ": a listing entry without a key or time: " + name);
        return;
      }
      ++seen;
      each(name, *when, std::strtoull(XmlElement(item, "Size").c_str(), nullptr, 10));
    });
    HLOCACHE_RETURN_IF_ERROR(malformed);
    token = XmlUnescape(XmlElement(reply.body, "NextContinuationToken"));
    if ((most != 0 && seen >= most) || XmlElement(reply.body, "IsTruncated") != "true" ||
        token.empty()) {
      return Status::Ok();
    }
  }
}

// "<path>#<size>" -> path and size; false when there is no '#' followed by digits.
bool SplitIndexName(std::string_view name, std::string& path, uint64_t& size) {
  const size_t hash = name.rfind('#');
  if (hash == std::string_view::npos || hash + 1 == name.size()) return false;
  size = 0;
  for (const char c : name.substr(hash + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    size = size * 10 + static_cast<uint64_t>(c - '0');
  }
  path = std::string(name.substr(0, hash));
  return true;
}

Result<std::vector<BucketEntry>> S3Backend::ListEntries() {
  const std::string root = Root();
  std::unordered_map<std::string, BucketEntry> artifacts;
  std::unordered_map<std::string, std::chrono::system_clock::time_point> uses;
  std::unordered_map<std::string, std::vector<std::string>> indexes;
  HLOCACHE_RETURN_IF_ERROR(ListObjects(
      root, 0,
      [&](std::string_view name, std::chrono::system_clock::time_point when, uint64_t size) {
        std::string_view rest = name.substr(root.size());
        if (rest.starts_with(kFiles)) {
          // files/<namespace>/<path>#<size>: the name index of the file artifact it names.
          rest.remove_prefix(kFiles.size());
          const size_t slash = rest.find('/');
          std::string path;
          uint64_t file_size = 0;
          if (slash == std::string_view::npos ||
              !SplitIndexName(rest.substr(slash + 1), path, file_size)) {
            return;
          }
          indexes[cache::ComposeFileKey(rest.substr(0, slash), path)].emplace_back(name);
          return;
        }
        const bool mark = rest.starts_with(kMarks);
        if (mark) rest.remove_prefix(kMarks.size());
        // <2 hex digits>/<key>; anything else under the prefix is not hlocache's.
        if (rest.size() < 4 || rest[2] != '/' || !IsHex(rest[0]) || !IsHex(rest[1])) return;
        const std::string key(rest.substr(3));
        if (mark) {
          auto& use = uses[key];
          use = std::max(use, when);
          return;
        }
        BucketEntry& entry = artifacts[key];
        entry.key = key;
        entry.size = size;
        entry.last_use = std::max(entry.last_use, when);
      }));
  std::vector<BucketEntry> out;
  out.reserve(artifacts.size());
  for (auto& [key, entry] : artifacts) {
    if (auto use = uses.find(key); use != uses.end()) {
      entry.last_use = std::max(entry.last_use, use->second);
    }
    if (auto index = indexes.find(key); index != indexes.end()) {
      entry.index_objects = std::move(index->second);
    }
    out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(),
            [](const BucketEntry& a, const BucketEntry& b) { return a.key < b.key; });
  return out;
}

Status S3Backend::DeleteObject(const std::string& url, std::string_view what) {
  S3Request del;
  del.method = "DELETE";
  del.url = url;
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(del, nullptr));
  if (reply.status != 204 && reply.status != 200 && reply.status != 404) {
    return Refused(reply, "DELETE", what);
  }
  return Status::Ok();
}

Status S3Backend::Delete(const BucketEntry& entry) {
  // The index first: a listing never names a file whose artifact is gone.
  for (const std::string& object : entry.index_objects) {
    HLOCACHE_RETURN_IF_ERROR(DeleteObject(UrlOf(object), object));
  }
  HLOCACHE_RETURN_IF_ERROR(DeleteObject(ObjectUrl(entry.key), entry.key));
  return DeleteObject(MarkUrl(entry.key), entry.key);
}

Result<std::vector<BucketFile>> S3Backend::ListFiles(std::string_view file_namespace,
                                                     std::string_view prefix, size_t limit) {
  const std::string start =
      Root() + std::string(kFiles) + std::string(file_namespace) + "/" + std::string(prefix);
  const size_t names_start = start.size() - prefix.size();
  std::map<std::string, std::pair<BucketFile, std::chrono::system_clock::time_point>> files;
  // Stale index objects of a path (an older size) are listed too: read a few more than asked.
  HLOCACHE_RETURN_IF_ERROR(
      ListObjects(start, limit == 0 ? 0 : limit * 2 + 16,
                  [&](std::string_view name, std::chrono::system_clock::time_point when, uint64_t) {
                    BucketFile file;
                    if (!SplitIndexName(name.substr(names_start), file.path, file.size)) return;
                    auto [it, fresh] = files.try_emplace(file.path);
                    if (!fresh && it->second.second > when) return;  // The newer index wins.
                    file.key = cache::ComposeFileKey(file_namespace, file.path);
                    it->second = {std::move(file), when};
                  }));
  std::vector<BucketFile> out;
  for (auto& [path, file] : files) {
    if (limit != 0 && out.size() >= limit) break;
    out.push_back(std::move(file.first));
  }
  return out;
}

Status S3Backend::IndexFile(std::string_view key, const compiler::ArtifactHeader& header,
                            uint64_t size) {
  const uint64_t overhead =
      compiler::FileArtifactOverhead(key, header.file_namespace, header.file_path);
  const uint64_t file_size = size >= overhead ? size - overhead : 0;
  const std::string base =
      Root() + std::string(kFiles) + header.file_namespace + "/" + header.file_path + "#";
  const std::string name = base + std::to_string(file_size);
  S3Request put;
  put.method = "PUT";
  put.url = UrlOf(name);
  put.headers = {{"Content-Type", "application/octet-stream"}};
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(put, nullptr));
  if (reply.status != 200) return Refused(reply, "PUT", name);
  // The path's index objects for earlier sizes.
  std::vector<std::string> stale;
  HLOCACHE_RETURN_IF_ERROR(ListObjects(
      base, 0, [&](std::string_view other, std::chrono::system_clock::time_point, uint64_t) {
        // <path>#<digits> only: "<path>#x#<size>" is another file's.
        const std::string_view digits = other.substr(base.size());
        if (other != name && !digits.empty() &&
            std::all_of(digits.begin(), digits.end(),
                        [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
          stale.emplace_back(other);
        }
      }));
  for (const std::string& object : stale)
    HLOCACHE_RETURN_IF_ERROR(DeleteObject(UrlOf(object), object));
  return Status::Ok();
}

Result<bool> S3Backend::Read(std::string_view key, const ReadSink& sink) {
  const std::string url = ObjectUrl(key);
  const uint64_t range = std::max<uint64_t>(1, options_.range_bytes);
  bool delivered = false, stopped = false;
  uint64_t total = 0, received = 0;
  std::string etag;
  S3Request first;
  first.url = url;
  first.headers.emplace_back("Range", "bytes=0-" + std::to_string(range - 1));
  first.on_start = [&](const S3Reply& r) {
    if (r.status != 200 && r.status != 206) return true;  // Its answer is read for the reason.
    total = r.status == 206 ? r.range_total.value_or(0) : r.content_length.value_or(0);
    etag = r.etag;
    delivered = true;  // The sink has seen this answer: it cannot be sent again.
    if (!sink.start(total)) stopped = true;
    return !stopped;
  };
  first.on_body = [&](std::string_view bytes) {
    received += bytes.size();
    Add(bytes_received_, bytes.size());
    if (!sink.chunk(bytes)) stopped = true;
    return !stopped;
  };
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(first, &delivered));
  if (stopped) return true;
  if (reply.status == 404) {
    if (XmlElement(reply.body, "Code") == "NoSuchBucket") {
      return Error(FailedPrecondition(name_ + ": no such bucket"));
    }
    return false;
  }
  if (reply.status == 416) {  // An empty object: no range of it exists.
    (void)sink.start(0);
    return true;
  }
  if (reply.status != 200 && reply.status != 206) return Error(Refused(reply, "GET", key));
  const uint64_t expected = reply.status == 200 ? total : std::min(total, range);
  if (received != expected) {
    return Error(Unavailable(name_ + ": GET " + std::string(key) + " broke off after " +
                             std::to_string(received) + " of " + std::to_string(expected) +
                             " bytes"));
  }
  if (reply.status == 200 || total <= range) return true;

  // The rest in ranges, `parallel` at a time, handed over in order.
  std::deque<std::future<Result<std::string>>> in_flight;
  uint64_t offset = range;
  const size_t parallel = static_cast<size_t>(std::max(1, options_.parallel));
  while (offset < total || !in_flight.empty()) {
    while (in_flight.size() < parallel && offset < total) {
      const uint64_t last = std::min(total, offset + range) - 1;
      in_flight.push_back(std::async(std::launch::async, [this, &url, &etag, key, offset, last] {
        return ReadRange(url, etag, key, offset, last);
      }));
      offset = last + 1;
    }
    Result<std::string> part = in_flight.front().get();
    in_flight.pop_front();
    if (!part) return Error(part.error());  // The others finish as their futures go.
    if (!sink.chunk(*part)) return true;
  }
  return true;
}

Result<std::string> S3Backend::ReadRange(const std::string& url, const std::string& etag,
                                         std::string_view key, uint64_t first, uint64_t last) {
  S3Request request;
  request.url = url;
  request.headers.emplace_back("Range",
                               "bytes=" + std::to_string(first) + "-" + std::to_string(last));
  if (!etag.empty()) request.headers.emplace_back("If-Match", etag);
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(request, nullptr));
  if (reply.status == 412) {
    return Error(Unavailable(name_ + ": " + std::string(key) + " was replaced while it was read"));
  }
  if (reply.status != 206) return Error(Refused(reply, "GET", key));
  if (reply.body.size() != last - first + 1) {
    return Error(Unavailable(name_ + ": a range of " + std::string(key) + " came back short"));
  }
  return std::move(reply.body);
}

Status S3Backend::Write(std::string_view key, uint64_t size, const ChunkSource& next,
                        const cache::ArtifactInfo&) {
  // The header, from the first piece: a file artifact is also indexed by its name.
  std::optional<compiler::ArtifactHeader> header;
  bool first = true;
  const ChunkSource peek = [&]() -> Result<std::string_view> {
    Result<std::string_view> piece = next();
    if (piece && first) {
      first = false;
      if (auto h = compiler::PeekArtifactHeader(*piece); h && !h->file_namespace.empty()) {
        header = std::move(*h);
      }
    }
    return piece;
  };
  Status written = Status::Ok();
  if (size > options_.multipart_threshold) {
    written = WriteMultipart(key, size, peek);
  } else {
    std::string bytes;
    bytes.reserve(size);
    while (bytes.size() <= size) {
      Result<std::string_view> piece = peek();
      if (!piece) return piece.error();
      if (piece->empty()) break;
      bytes.append(*piece);
    }
    if (bytes.size() != size) {
      return InvalidArgument(name_ + ": " + std::string(key) + " was to be " +
                             std::to_string(size) + " bytes, got " + std::to_string(bytes.size()));
    }
    written = WriteWhole(key, std::move(bytes));
  }
  if (!written.ok() || !header) return written;
  return IndexFile(key, *header, size);
}

Status S3Backend::WriteWhole(std::string_view key, std::string bytes) {
  const std::string url = ObjectUrl(key);
  const std::string sum = Hex128(bytes.data(), bytes.size());
  S3Request head;
  head.method = "HEAD";
  head.url = url;
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply there, Send(head, nullptr));
  if (there.status == 200 && there.content_length == bytes.size() && there.meta_sum == sum) {
    return Status::Ok();  // Already uploaded, by this host or another.
  }
  if (there.status != 200 && there.status != 404) return RefusedHead(there, key);
  S3Request put;
  put.method = "PUT";
  put.url = url;
  put.headers = {{"Content-Type", "application/octet-stream"}, {"x-amz-meta-hlocache-xxh3", sum}};
  put.body = bytes;
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(put, nullptr));
  if (reply.status != 200) return Refused(reply, "PUT", key);
  return Status::Ok();
}

Status S3Backend::WriteMultipart(std::string_view key, uint64_t size, const ChunkSource& next) {
  const std::string url = ObjectUrl(key);
  S3Request head;
  head.method = "HEAD";
  head.url = url;
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply there, Send(head, nullptr));
  if (there.status == 200 && there.content_length == size && !there.meta_sum.empty()) {
    return Status::Ok();
  }
  if (there.status != 200 && there.status != 404) return RefusedHead(there, key);

  S3Request start;
  start.method = "POST";
  start.url = url;
  start.query = CanonicalQuery({{"uploads", ""}});
  start.headers = {{"Content-Type", "application/octet-stream"},
                   {"x-amz-meta-hlocache-xxh3", "multipart"}};
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply started, Send(start, nullptr));
  if (started.status != 200) return Refused(started, "POST ?uploads", key);
  const std::string upload_id = XmlElement(started.body, "UploadId");
  if (upload_id.empty()) {
    return Unavailable(name_ + ": starting a multipart upload of " + std::string(key) +
                       " gave no UploadId");
  }
  auto abort = [&](Status why) {
    S3Request request;
    request.method = "DELETE";
    request.url = url;
    request.query = CanonicalQuery({{"uploadId", upload_id}});
    (void)Send(request, nullptr);  // What it leaves, the bucket's lifecycle rules clean up.
    return why;
  };

  const uint64_t part_bytes = std::max<uint64_t>(options_.part_bytes, uint64_t{5} << 20);
  const size_t parallel = static_cast<size_t>(std::max(1, options_.parallel));
  std::deque<std::future<Result<std::string>>> in_flight;  // Each part's ETag.
  std::vector<std::string> etags;
  std::string part, carry;
  uint64_t sent = 0;
  int number = 0;
  bool source_done = false;
  Status failed = Status::Ok();
  auto collect_one = [&] {
    Result<std::string> etag = in_flight.front().get();
    in_flight.pop_front();
    if (!etag) {
      if (failed.ok()) failed = etag.error();
    } else {
      etags.push_back(std::move(*etag));
    }
  };
  while (failed.ok() && (sent < size || !carry.empty())) {
    part = std::move(carry);
    carry.clear();
    while (part.size() < part_bytes && !source_done) {
      Result<std::string_view> piece = next();
      if (!piece) {
        failed = piece.error();
        break;
      }
      if (piece->empty()) {
        source_done = true;
        break;
      }
      const size_t room = static_cast<size_t>(part_bytes - part.size());
      part.append(piece->substr(0, room));
      if (piece->size() > room) carry.assign(piece->substr(room));
    }
    if (!failed.ok() || part.empty()) break;
    sent += part.size();
    if (sent > size) break;
    ++number;
    auto body = std::make_shared<std::string>(std::move(part));
    in_flight.push_back(std::async(
        std::launch::async, [this, &url, &upload_id, key, number, body]() -> Result<std::string> {
          S3Request request;
          request.method = "PUT";
          request.url = url;
          request.query =
              CanonicalQuery({{"partNumber", std::to_string(number)}, {"uploadId", upload_id}});
          request.body = *body;
          HLOCACHE_ASSIGN_OR_RETURN(S3Reply reply, Send(request, nullptr));
          if (reply.status != 200 || reply.etag.empty()) {
            return Error(Refused(reply, "PUT part " + std::to_string(number) + " of", key));
          }
          return reply.etag;
        }));
    if (in_flight.size() >= parallel) collect_one();
  }
  while (!in_flight.empty()) collect_one();
  if (!failed.ok()) return abort(failed);
  if (sent != size) {
    return abort(InvalidArgument(name_ + ": " + std::string(key) + " was to be " +
                                 std::to_string(size) + " bytes, got " + std::to_string(sent) +
                                 (sent > size ? " or more" : "")));
  }
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] +
           "</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  S3Request complete;
  complete.method = "POST";
  complete.url = url;
  complete.query = CanonicalQuery({{"uploadId", upload_id}});
  complete.headers = {{"Content-Type", "application/xml"}};
  complete.body = xml;
  HLOCACHE_ASSIGN_OR_RETURN(S3Reply done, Send(complete, nullptr));
  // S3 may answer 200 and report a failure in the body.
  if (done.status != 200 || done.body.find("<Error>") != std::string::npos) {
    return abort(Refused(done, "completing the upload of", key));
  }
  return Status::Ok();
}

}  // namespace

bool IsS3Url(std::string_view spec) { return spec.starts_with("s3://"); }

std::optional<std::chrono::system_clock::time_point> ParseS3Time(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then optional fractional seconds, then Z.
  if (text.size() < 20 || text.back() != 'Z' || text[4] != '-' || text[7] != '-' ||
      text[10] != 'T' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  auto number = [&](size_t at, size_t digits, int& out) {
    out = 0;
    for (size_t i = at; i < at + digits; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  std::tm tm{};
  int year = 0, month = 0;
  if (!number(0, 4, year) || !number(5, 2, month) || !number(8, 2, tm.tm_mday) ||
      !number(11, 2, tm.tm_hour) || !number(14, 2, tm.tm_min) || !number(17, 2, tm.tm_sec)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  auto when = std::chrono::system_clock::from_time_t(::timegm(&tm));
  std::string_view fraction = text.substr(19, text.size() - 20);
  if (!fraction.empty()) {
    if (fraction.front() != '.' || fraction.size() < 2) return std::nullopt;
    int64_t micros = 0;
    int digits = 0;
    for (const char c : fraction.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      if (digits < 6) {
        micros = micros * 10 + (c - '0');
        ++digits;
      }
    }
    while (digits++ < 6) micros *= 10;
    when += std::chrono::microseconds(micros);
  }
  return when;
}

BucketGcPlan PlanBucketGc(std::vector<BucketEntry> entries, uint64_t max_bytes,
                          std::chrono::system_clock::time_point now,
                          std::chrono::seconds keep_used_within) {
  BucketGcPlan plan;
  plan.entries_before = entries.size();
  for (const BucketEntry& e : entries) plan.bytes_before += e.size;
  std::sort(entries.begin(), entries.end(), [](const BucketEntry& a, const BucketEntry& b) {
    return a.last_use != b.last_use ? a.last_use < b.last_use : a.key < b.key;
  });
  uint64_t left = plan.bytes_before;
  for (BucketEntry& e : entries) {
    if (left <= max_bytes) break;
    if (now - e.last_use < keep_used_within) {
      ++plan.kept_as_recent;
      continue;
    }
    left -= e.size;
    plan.evict.push_back(std::move(e));
  }
  plan.bytes_after = left;
  return plan;
}

Result<std::unique_ptr<Bucket>> MakeS3Backend(const std::string& url, S3Options options) {
  if (!IsS3Url(url)) return Error(InvalidArgument(url + ": not an s3:// URL"));
  std::string_view rest = std::string_view(url).substr(5);
  const size_t slash = rest.find('/');
  const std::string bucket(rest.substr(0, slash));
  std::string prefix(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  while (!prefix.empty() && prefix.front() == '/') prefix.erase(prefix.begin());
  if (!IsBucketName(bucket)) {
    return Error(InvalidArgument(url + ": '" + bucket +
                                 "' is not a bucket name (3 to 63 lowercase letters, digits, "
                                 "dots and hyphens)"));
  }
  S3ConnectionOptions connection;
  connection.region = Env("AWS_REGION");
  if (connection.region.empty()) connection.region = Env("AWS_DEFAULT_REGION");
  if (connection.region.empty()) connection.region = "us-east-1";
  connection.credentials.access_key_id = Env("AWS_ACCESS_KEY_ID");
  connection.credentials.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  connection.credentials.session_token = Env("AWS_SESSION_TOKEN");
  if (connection.credentials.access_key_id.empty() ||
      connection.credentials.secret_access_key.empty()) {
    return Error(PermissionDenied(
        url + ": no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"));
  }
  connection.ca_cert = options.ca_cert;
  connection.connect_timeout = options.connect_timeout;
  connection.stall_timeout = options.stall_timeout;

  std::string endpoint = options.endpoint;
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
  std::string bucket_url;
  if (endpoint.empty()) {
    bucket_url = "https://" + bucket + ".s3." + connection.region + ".amazonaws.com";
  } else {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://")) {
      return Error(InvalidArgument(url + ": the endpoint " + endpoint +
                                   " is not an http:// or https:// URL"));
    }
    bucket_url = endpoint + "/" + bucket;
  }
  std::string name = "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
  return std::unique_ptr<Bucket>(new S3Backend(std::move(name), std::move(bucket_url),
                                               std::move(prefix), std::move(options),
                                               std::move(connection)));
}

}  // namespace hlocache::storage
