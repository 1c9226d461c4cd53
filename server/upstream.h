// The origin a per-host server reads through to (`hlocache serve --upstream URL`).
//
// A fleet runs one origin and one server per host. A host's server answers from its own store
// when it can; on a miss it fetches the artifact from the origin (storing it, so the next
// process on the host gets it locally) and forwards compile requests there, so one compile on
// the origin serves every host. What this host stores by itself (uploads, and compiles it had
// to run while the origin was away) is queued and uploaded to the origin in the background.
//
// The origin is a storage backend (storage/http_backend.h) and is never required. A request
// that cannot reach it fails fast with kUnavailable and the caller goes on without it (a miss
// is served as a miss; a compile runs here); after a failure the origin rests as every
// backend does (storage/availability.h: 1 s, doubling to 30 s), so a dead origin costs one
// connect timeout per rest, not one per request. The upload queue retries after each rest,
// which is how this host catches up once the origin is back.
//
// The origin may also be a bucket (`--upstream s3://BUCKET[/PREFIX]`, storage/s3_backend.h):
// then misses are fetched from the bucket, this host compiles what the bucket lacks, and
// stores the artifact in the bucket before it answers (Publish), so hosts on one bucket share
// every compile without an origin server. A bucket lists no file artifacts.
//
// Several origins in front of one bucket (`--upstream URL,URL,s3://BUCKET`): reads go to the
// bucket, the authority on what exists, and to the origins only while it cannot be reached;
// a compile goes to the origin that rendezvous hashing ranks first for the key
// (storage/rendezvous.h), so every host sends a key to the same origin and the fleet compiles
// it once, and to the key's next origin while that one cannot be reached or rests. Without a
// bucket, reads and uploads go to the key's origins in the same order. Each origin and the
// bucket rest on their own.
//
// Concurrent fetches and forwarded compiles of one key share one request to the origin.
//
// Thread safety: every method may be called from any thread. The store must outlive this.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/store.h"
#include "common/backoff.h"
#include "common/status.h"
#include "server/file_listing.h"
#include "storage/backend.h"

namespace hlocache::server {

struct UpstreamOptions {
  // http(s)://host:port of an origin, s3://BUCKET[/PREFIX], or a comma-separated list of
  // origins and at most one bucket.
  std::string url;
  std::string token;    // Bearer token for the origin (read to fetch and compile, write to upload).
  std::string ca_cert;  // PEM file of the CA that signs an https origin; empty: the system's.
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds io_timeout{30000};        // Fetches and uploads.
  std::chrono::milliseconds compile_timeout{600000};  // Forwarded compiles.
  BackoffOptions backoff;      // 1 s after a failure, doubling to 30 s (common/backoff.h).
  bool strict_checks = false;  // serve --verify-uploads: also applies to fetched artifacts.
  // Where uploads still queued at a clean stop are written, one key per line, to be queued
  // again at the next start (a server stopped while its origin is away still catches up).
  // Empty: not kept.
  std::filesystem::path pending_file;
  // Sent with every request (a mount names its namespace: X-Hlocache-Namespace).
  std::vector<std::pair<std::string, std::string>> headers;
};

struct UpstreamCompile {
  std::string artifact;      // Checked, and stored here under the request's key.
  std::string origin_cache;  // The origin's X-Hlocache-Cache: hit, miss or coalesced.
  bool shared = false;       // Another request on this host forwarded the same compile.
};

// One origin's or the bucket's state.
struct UpstreamPartStats {
  std::string url;
  bool up = true;
  uint64_t failures = 0;
  uint64_t skipped = 0;
};

struct UpstreamStats {
  uint64_t fetches = 0;         // Artifacts fetched from the origin and stored here.
  uint64_t fetch_misses = 0;    // Fetches the origin answered with 404.
  uint64_t compiles = 0;        // Compiles forwarded and answered with an artifact.
  uint64_t uploads = 0;         // Artifacts uploaded to the origin.
  uint64_t upload_refused = 0;  // Uploads the origin refused (4xx); not retried.
  uint64_t failures = 0;  // Requests that could not reach the origin or were refused (not 404).
  uint64_t skipped = 0;   // Requests not tried because the origin was backing off.
  uint64_t pending_uploads = 0;    // Queued now.
  bool up = true;                  // The last request to each origin and the bucket reached it.
  storage::RequestStats requests;  // The bucket's request counters (origins keep none).
  std::vector<UpstreamPartStats> parts;  // Each origin, then the bucket.
};

// Whether `list` names at least one origin or bucket, every origin as a well-formed http(s)
// URL, one bucket at most, nothing twice. Errors: kInvalidArgument, naming the part.
Status CheckUpstreamList(std::string_view list);

class Upstream {
 public:
  // Errors: kInvalidArgument for a list CheckUpstreamList refuses; a bucket's errors
  // (storage/s3_backend.h).
  static Result<std::unique_ptr<Upstream>> Make(UpstreamOptions options, cache::Store& store);
  // Stops the uploader; uploads still queued are written to `pending_file` (or dropped, and
  // said so on stderr, without one).
  virtual ~Upstream() = default;

  virtual const std::string& url() const = 0;

  // Fetches `key` into the store, checked as an upload is, from the first in the read order
  // (the bucket, then the key's origins) that answers. True when the store now holds it;
  // false when the first to answer does not have it. Errors: kUnavailable when none can be
  // reached, is resting after a failure or fails (5xx), kPermissionDenied when it
  // refuses this host's token, the store's errors, kInvalidArgument when what the origin sent
  // fails a check (nothing is stored) or the origin refused the request (another 4xx).
  virtual Result<bool> Fetch(std::string_view key) = 0;

  // Whether the first in the read order that answers holds `key`, and its size. Errors as
  // Fetch.
  virtual Result<std::optional<uint64_t>> Head(std::string_view key) = 0;

  // The file artifacts of `file_namespace` under `prefix`: the bucket's name index, else (no
  // bucket, or it cannot be reached) GET /v1/files of the first origin, in the list's order,
  // that answers; in path order; at most `limit` (0: every). Errors as Fetch.
  virtual Result<std::vector<FileEntry>> ListFiles(std::string_view file_namespace,
                                                   std::string_view prefix, size_t limit) = 0;

  // Finds the artifact of the module whose key here is `key` in the bucket, else asks the
  // key's origins in rendezvous order to compile (or find) it, the next one when one cannot
  // be reached; stores what it gets. Errors: kInvalidArgument (400) and kFailedPrecondition
  // (422) when an origin rejects the module itself, with the origin's reason: compiling here
  // would fail alike. kUnavailable for everything after which compiling here is the right
  // thing: no origin can be reached, or each is busy, read-only, or keys the module
  // differently (another compiler); the bucket alone does not hold it.
  virtual Result<UpstreamCompile> Compile(std::string_view key, std::string_view hlo_text,
                                          std::string_view target) = 0;

  // Queues `key` (already in the store) for upload to the bucket, or without one to the key's
  // first origin that is not resting; the uploader sends it when that one is reachable. A key
  // already queued is queued once.
  virtual void QueueUpload(std::string_view key) = 0;

  // For what this server compiled itself: with a bucket, writes `key` there before returning
  // (hosts that read the bucket find it as soon as the compile is answered), and queues it
  // should the write fail or the bucket rest; without one, queues it.
  virtual void Publish(std::string_view key) = 0;

  // Tells the bucket `key` was just served here (from this server's store or through it), for
  // `hlocache gc --cache s3://...` (storage/s3_backend.h: at most once an hour per key, in the
  // background). Nothing without a bucket.
  virtual void NoteUse(std::string_view key) = 0;

  virtual UpstreamStats stats() const = 0;
};

}  // namespace hlocache::server
