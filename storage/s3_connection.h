// One connection to an S3-compatible endpoint (AWS S3, Ceph's RADOS Gateway, MinIO, ...): a
// request signed with AWS Signature Version 4, sent over libcurl, its answer handed back.
//
// libcurl signs (CURLOPT_AWS_SIGV4) with the payload unsigned (x-amz-content-sha256:
// UNSIGNED-PAYLOAD): what is read back is verified by its container's checksums instead, and a
// body never has to be read twice. libcurl 7.88 signs the query string as it is given, so a
// request's query must already be canonical: parameters sorted by name, names and values
// URI-encoded, "name=" for a parameter without a value (CanonicalQuery builds one).
//
// Bounded waits: `connect_timeout` for the connection, and a transfer that moves nothing for
// `stall_timeout` (whole seconds, libcurl's granularity) is abandoned. No proxy from the
// environment, no redirects; an https endpoint's certificate is always verified (against
// `ca_cert` when given, else the system's store). Credentials go only into the signature and
// the security-token header, never into an error message.
//
// Thread safety: a connection makes one request at a time; S3ConnectionPool may be used from
// any thread and lends each connection to one caller at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hlocache::storage {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // Empty for long-lived keys.
};

struct S3ConnectionOptions {
  std::string region = "us-east-1";
  S3Credentials credentials;
  std::string ca_cert;  // PEM file of the CA that signs an https endpoint; empty: the system's.
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds stall_timeout{30000};
};

struct S3Reply {
  int status = 0;
  std::optional<uint64_t> content_length;
  // The object's whole size, from "Content-Range: bytes A-B/SIZE" (answers to ranged GETs).
  std::optional<uint64_t> range_total;
  std::string etag;           // The ETag header, quotes included, as S3 wants it back.
  std::string last_modified;  // The Last-Modified header.
  std::string meta_sum;       // The x-amz-meta-hlocache-xxh3 header (S3Backend's checksum).
  std::string body;           // Without on_body, or an error's answer (its first 64 KiB).
  bool stopped = false;       // A callback stopped the request.
};

struct S3Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE.
  std::string url;             // scheme://host[:port]/path, the path URI-encoded.
  std::string query;           // Canonical (CanonicalQuery); empty for none.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body sent with PUT and POST: `body`, whole (so a failed request can be sent again).
  std::string_view body;
  // For GET: called once the status line and headers are in (the reply so far: status and
  // headers; false stops before the body), then, for a 2xx answer, with each piece of the body
  // (false stops). Without on_body the body is kept in the reply.
  std::function<bool(const S3Reply& reply)> on_start;
  std::function<bool(std::string_view bytes)> on_body;
};

// "a=1&b=x%2Fy&uploads=": `params` sorted by name, each name and value URI-encoded.
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);
// RFC 3986 encoding as SigV4 wants it: unreserved characters as they are, the rest %XX;
// '/' kept when `keep_slash` (object paths).
std::string UriEncode(std::string_view text, bool keep_slash);
// The text of the first <tag>...</tag> in an S3 XML answer (its Code, UploadId, ...), or empty.
std::string XmlElement(std::string_view xml, std::string_view tag);

// `options` is borrowed and must outlive the connection (S3ConnectionPool owns both).
class S3Connection {
 public:
  explicit S3Connection(const S3ConnectionOptions& options);
  ~S3Connection();
  S3Connection(const S3Connection&) = delete;
  S3Connection& operator=(const S3Connection&) = delete;

  // Sends `request`. Returns the reply once the endpoint answered (any status), also when a
  // callback stopped it. Errors: kUnavailable, naming the URL and libcurl's reason, when there
  // was no answer or the transfer broke or stalled.
  Result<S3Reply> Perform(const S3Request& request);

 private:
  struct Transfer;
  const S3ConnectionOptions& options_;
  void* curl_ = nullptr;
  int socket_ = -1;  // The connection's socket, from libcurl's socket callback; -1 before one.
};

// Connections kept for reuse (each keeps its TCP and TLS session open between requests).
class S3ConnectionPool {
 public:
  explicit S3ConnectionPool(S3ConnectionOptions options) : options_(std::move(options)) {}

  std::unique_ptr<S3Connection> Take();
  // Keeps `connection` for the next Take (dropped beyond a few kept ones). Give back only a
  // connection whose last request was answered.
  void GiveBack(std::unique_ptr<S3Connection> connection);

  const S3ConnectionOptions& options() const { return options_; }

 private:
  static constexpr size_t kMostKept = 16;
  const S3ConnectionOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<S3Connection>> kept_;
};

}  // namespace hlocache::storage
