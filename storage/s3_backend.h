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
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/backend.h"

namespace hlocache::storage {

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
};

// Whether `spec` names a bucket (starts with s3://).
bool IsS3Url(std::string_view spec);

// Errors: kInvalidArgument for a malformed URL or bucket name, or an endpoint that is not
// http(s)://; kPermissionDenied when the credentials are not set. Named by its URL.
Result<std::unique_ptr<Backend>> MakeS3Backend(const std::string& url, S3Options options);

}  // namespace hlocache::storage
