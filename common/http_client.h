// One way to open an HTTP(S) connection to a hlocache server, for the client's HTTP tier and
// for a server's upstream: TCP_NODELAY, bounded connect and I/O waits, a bearer token, and an
// https server's certificate always verified (against `ca_cert` when given, else the system's).
//
// Heavy (it includes httplib.h): include it only where a request is made.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache {

struct HttpClientSettings {
  std::string token;    // Bearer token; empty for none.
  std::string ca_cert;  // PEM file; empty for the system's store.
  std::chrono::milliseconds connect_timeout{300};
};

// A server's base URL as given by a user: http://host:port or https://host:port, trailing
// slashes dropped. Errors: kInvalidArgument for anything else.
inline Result<std::string> ParseServerUrl(std::string_view url) {
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return Error(InvalidArgument("'" + std::string(url) + "' is not an http:// or https:// URL"));
  }
  std::string trimmed(url);
  while (trimmed.size() > 8 && trimmed.back() == '/') trimmed.pop_back();
  return trimmed;
}

// `url` is http://host:port or https://host:port (from ParseServerUrl). One request
// per connection: clients are made per request and closed after it.
inline std::unique_ptr<httplib::Client> MakeHttpClient(const std::string& url,
                                                       const HttpClientSettings& settings,
                                                       std::chrono::milliseconds io_timeout) {
  auto client = std::make_unique<httplib::Client>(url);
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(settings.connect_timeout);
  client->set_read_timeout(io_timeout);
  client->set_write_timeout(io_timeout);
  client->set_keep_alive(false);
  if (!settings.token.empty()) client->set_bearer_token_auth(settings.token.c_str());
  if (url.starts_with("https://")) {
    client->enable_server_certificate_verification(true);
    if (!settings.ca_cert.empty()) client->set_ca_cert_path(settings.ca_cert);
  }
  return client;
}

// How long to wait for the answer to an upload of `bytes` once the last byte has left. A
// server answers only when the artifact is durable, and what is still in the connection's
// buffers when the last byte leaves (the kernel's send and receive buffers: up to tens of MiB)
// must reach its disk first: a disk writing 4 MiB/s needs seconds for it. While the body is
// being sent, the usual wait applies to each step of progress.
inline std::chrono::milliseconds UploadReplyTimeout(uint64_t bytes,
                                                    std::chrono::milliseconds request_timeout) {
  constexpr uint64_t kMostInFlight = uint64_t{64} << 20;
  constexpr uint64_t kSlowestDiskBytesPerSecond = uint64_t{4} << 20;
  const uint64_t in_flight = bytes < kMostInFlight ? bytes : kMostInFlight;
  return request_timeout + std::chrono::milliseconds(in_flight * 1000 / kSlowestDiskBytesPerSecond);
}

// "404 (error: no artifact ...)": a reply's status and the start of its body, on one line.
inline std::string DescribeReply(const httplib::Response& r) {
  std::string body = r.body.substr(0, 200);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return std::to_string(r.status) + (body.empty() ? "" : " (" + body + ")");
}

}  // namespace hlocache
