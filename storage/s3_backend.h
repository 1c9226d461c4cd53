// A bucket of an S3-compatible object store as a storage backend: `s3://BUCKET[/PREFIX]`.
//
// Objects are the artifacts' verified containers, byte for byte, under
// PREFIX/<2 hex digits of the key>/<key>, so that no one key prefix takes every request (S3
// partitions by prefix). The bucket must exist; hlocache never creates or deletes buckets.
//
// Where: the endpoint is S3Options::endpoint (`--s3-endpoint URL`), else $AWS_ENDPOINT_URL_S3,
// else $AWS_ENDPOINT_URL, else AWS (https://BUCKET.s3.REGION.amazonaws.com); a custom endpoint
// is addressed path-style (ENDPOINT/BUCKET/KEY), as Ceph's gateway and MinIO expect. The region
// is $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1. Credentials come from
// $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN and appear in no message.
//
// Reads: one ranged GET of the first `range_bytes`; an object larger than that comes down as
// ranged GETs `parallel` at a time, all pinned to the first answer's ETag (If-Match), handed to
// the sink in order. Callers verify what they read (storage/backend.h).
//
// Writes: a HEAD first, so a fleet uploads each key once: an object of the same size whose
// x-amz-meta-hlocache-xxh3 is the XXH3-128 of the bytes to write is left as it is (a multipart
// object, whose checksum is not known up front, only by its size and that it has one). An
// artifact up to `multipart_threshold` goes up in one PUT; a larger one as a multipart upload of
// `part_bytes` parts, `parallel` at a time, completed only once every part is in and aborted on
// any failure: nothing is visible under the key until the whole artifact is.
//
// Uses: NoteUse writes an empty object PREFIX/access/<2 hex digits>/<key> in the background,
// whose Last-Modified (the object store's clock) is when the key was last used, at most once
// per key per `mark_interval` from one backend, one try each on connections with short waits
// (1 s to connect, 2 s without progress: a process that exits waits for the mark in flight);
// marks that cannot be written are dropped, the first failure said on stderr, and after a
// 401/403 (credentials that may only read) no more are tried.
// `hlocache gc` reads them (ListEntries): a key's last use is the later of its upload and its
// mark.
//
// File artifacts (compiler/artifact/file_payload.h) are also indexed by name, so that other
// hosts' mounts can list them: an empty object PREFIX/files/<namespace>/<path>#<file bytes>,
// written after the artifact and deleted with it (ListFiles).
//
// Failures: a request without an answer, or answered 500, 502, 503 (SlowDown) or 504, is sent
// again up to `attempts` times in all, after a pause of `retry_pause` doubling each time, with
// jitter; then it is kUnavailable (callers rest the backend: storage/availability.h). 401 and
// 403 are kPermissionDenied, naming S3's reason (InvalidAccessKeyId, SignatureDoesNotMatch,
// AccessDenied) and the variables the credentials come from; a missing bucket is
// kFailedPrecondition; other 4xx are kInvalidArgument.
//
// Thread safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/backend.h"

namespace hlocache::storage {

// How often one backend marks a use of one key, at most.
inline constexpr std::chrono::seconds kMarkInterval{3600};

struct S3Options {
  std::string endpoint;  // http(s)://host[:port]; empty: from the environment, else AWS.
  std::string ca_cert;   // PEM file of the CA that signs an https endpoint; empty: the system's.
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds stall_timeout{30000};
  int attempts = 4;
  std::chrono::milliseconds retry_pause{100};
  uint64_t range_bytes = uint64_t{16} << 20;
  uint64_t multipart_threshold = uint64_t{64} << 20;
  uint64_t part_bytes = uint64_t{16} << 20;  // At least 5 MiB, S3's smallest part.
  int parallel = 4;
  std::chrono::seconds mark_interval = kMarkInterval;  // Uses of a key marked at most this often.
  int list_page = 1000;                                // Objects per listing request (S3's most).
};

// An artifact in a bucket, for gc.
struct BucketEntry {
  std::string key;
  uint64_t size = 0;
  // The later of its upload and its last use mark, by the object store's clock.
  std::chrono::system_clock::time_point last_use;
  std::vector<std::string> index_objects;  // A file artifact's name index (deleted with it).
};

// A file artifact in a bucket's name index.
struct BucketFile {
  std::string path;
  uint64_t size = 0;  // The file's bytes.
  std::string key;    // cache::ComposeFileKey(namespace, path).
};

// A bucket: a backend, and what `hlocache gc --cache s3://...` needs beyond one.
class Bucket : public Backend {
 public:
  // Every artifact under the prefix (ListObjectsV2, every page), with its last use. Errors as
  // the backend's.
  virtual Result<std::vector<BucketEntry>> ListEntries() = 0;
  // Deletes the entry's artifact, its use mark and its name index. Deleting what is not there
  // succeeds.
  virtual Status Delete(const BucketEntry& entry) = 0;
  // The file artifacts of `file_namespace` whose path starts with `prefix`, in path order; at
  // most `limit` (0: every). Errors as the backend's.
  virtual Result<std::vector<BucketFile>> ListFiles(std::string_view file_namespace,
                                                    std::string_view prefix, size_t limit) = 0;
  // Waits until the use marks noted so far are written or dropped.
  virtual void FlushMarks() = 0;
};

// Whether `spec` names a bucket (starts with s3://).
bool IsS3Url(std::string_view spec);

// Errors: kInvalidArgument for a malformed URL or bucket name, or an endpoint that is not
// http(s)://; kPermissionDenied when the credentials are not set. Named by its URL.
Result<std::unique_ptr<Bucket>> MakeS3Backend(const std::string& url, S3Options options);

// What gc of a bucket removes: least recently used first, until what is left is at most
// `max_bytes`, never an entry used less than `keep_used_within` before `now` (when only such
// entries are left, the bucket stays over `max_bytes`).
struct BucketGcPlan {
  std::vector<BucketEntry> evict;  // Oldest use first.
  uint64_t bytes_before = 0, bytes_after = 0;
  size_t entries_before = 0;
  size_t kept_as_recent = 0;  // Recent entries left in place while over max_bytes.
};
BucketGcPlan PlanBucketGc(std::vector<BucketEntry> entries, uint64_t max_bytes,
                          std::chrono::system_clock::time_point now,
                          std::chrono::seconds keep_used_within);

// "2026-11-26T21:04:05.123Z" (S3's LastModified) as a time; nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> ParseS3Time(std::string_view text);

}  // namespace hlocache::storage
