// An hlocache server as a storage backend: its artifact routes (HEAD, GET and PUT
// /v1/artifacts/{key}) and its compile route (POST /v1/compile).
//
// Reads stream over libcurl on connections kept within a burst of requests (common/http_get.h);
// writes and compiles go over cpp-httplib. An https server's certificate is always verified:
// against `ca_cert` when given, else the system's store.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/http_get.h"
#include "storage/backend.h"

namespace hlocache::storage {

struct HttpBackendOptions {
  std::string token;    // Bearer token; empty for none.
  std::string ca_cert;  // PEM file of the CA that signs https servers; empty: the system's.
  std::chrono::milliseconds connect_timeout{300};
  // A read or write that makes no progress for this long fails (a write's reply may take
  // longer: the server checks what it was sent first).
  std::chrono::milliseconds io_timeout{5000};
  std::chrono::milliseconds compile_timeout{600000};
  // Sent with every request (a mount names its namespace: X-Hlocache-Namespace).
  std::vector<std::pair<std::string, std::string>> headers;
};

// The options of reads over libcurl (common/http_get.h) from the same server with the same
// credentials and timeouts, for a caller that reads other routes of it (a server's upstream
// lists file artifacts).
HttpGetOptions HttpGetOptionsOf(const HttpBackendOptions& options);

// `url` is http://host:port or https://host:port (a trailing slash is dropped). Errors:
// kInvalidArgument for any other URL. Named by the URL.
Result<std::unique_ptr<Backend>> MakeHttpBackend(const std::string& url,
                                                 HttpBackendOptions options);

}  // namespace hlocache::storage
