// Reads from an HTTP(S) server with libcurl: GET with the body handed over piece by piece as
// it arrives, GET of a small body whole, and HEAD.
//
// Why not cpp-httplib, which sends everything else: Debian's cpp-httplib is a shared library
// built to read a body 4 KiB at a time, with a poll(2) before each read, so a 256 MiB body
// costs 131,072 system calls and arrives at about 160 MB/s on a loopback here. libcurl reads
// up to kReceiveBufferBytes at a time and keeps connections open between requests of one
// HttpGetter (one the server has closed is noticed and replaced before a request).
//
// Bounded waits: `connect_timeout` for the connection, and a transfer that receives nothing
// for `stall_timeout` (rounded up to whole seconds, libcurl's granularity) is abandoned.
// Proxies from the environment are not used (the server is named directly), redirects are
// not followed, an https server's certificate is always verified (against `ca_cert` when
// given, else the system's store).
//
// Thread safety: an HttpGetter makes one request at a time; HttpGetterPool may be used from
// any thread, and lends each getter to one caller at a time.
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

namespace hlocache {

struct HttpGetOptions {
  std::chrono::milliseconds connect_timeout{300};
  std::chrono::milliseconds stall_timeout{30000};
  std::string bearer_token;  // Sent as "Authorization: Bearer ..."; empty for none.
  std::string ca_cert;       // PEM file of the CA that signs an https server; empty: system's.
  std::vector<std::pair<std::string, std::string>> headers;  // Sent with every request.
};

struct HttpHead {
  int status = 0;
  std::optional<uint64_t> content_length;
};

class HttpGetter {
 public:
  static constexpr size_t kReceiveBufferBytes = size_t{512} << 10;

  // `base_url` is http://host:port or https://host:port; request paths are appended to it.
  HttpGetter(std::string base_url, HttpGetOptions options);
  ~HttpGetter();
  HttpGetter(const HttpGetter&) = delete;
  HttpGetter& operator=(const HttpGetter&) = delete;

  // Called once the status line and headers are in: the status, and the Content-Length when
  // the server sent one. Returning false stops the request before its body.
  using OnStart = std::function<bool(int status, std::optional<uint64_t> content_length)>;
  // Called with each piece of the body, in order. Returning false stops the request.
  using OnBody = std::function<bool(std::string_view bytes)>;

  // GETs `path` (with its query). Returns the status once the server answered, also when a
  // callback stopped the request (the caller knows why it did). Errors: kUnavailable, naming
  // the URL and libcurl's reason, when there was no answer or the transfer broke or stalled.
  Result<int> Get(std::string_view path, const OnStart& on_start, const OnBody& on_body);

  // GETs `path` whole, for a body known to be small (a listing). The body of any status is
  // returned. Errors as Get.
  Result<std::pair<int, std::string>> GetWhole(std::string_view path);

  // HEAD of `path`. Errors as Get.
  Result<HttpHead> Head(std::string_view path);

  const std::string& base_url() const { return base_url_; }

 private:
  struct Transfer;
  Result<int> Perform(std::string_view path, bool head, Transfer& transfer);

  const std::string base_url_;
  const HttpGetOptions options_;
  void* curl_ = nullptr;     // CURL*; keeps its connection between requests.
  void* headers_ = nullptr;  // curl_slist*
};

// Getters of one server kept between requests, so that a request reuses an open connection:
// the requests of one burst (a mount's HEAD then GET, a process's reads at start-up) share
// connections. A getter unused for kMostIdle is dropped, so that the first request after a
// pause connects anew: a connection whose link went down while it sat idle gives no sign of
// it (no reset arrives), and a request sent on it would wait its whole stall timeout, where a
// new connection fails within the connect timeout.
class HttpGetterPool {
 public:
  static constexpr std::chrono::milliseconds kMostIdle{250};
  static constexpr size_t kMostKept = 8;

  HttpGetterPool(std::string base_url, HttpGetOptions options)
      : base_url_(std::move(base_url)), options_(std::move(options)) {}

  // A getter to use and then give back (or drop, should its request have failed).
  std::unique_ptr<HttpGetter> Take();
  void GiveBack(std::unique_ptr<HttpGetter> getter);

 private:
  using Clock = std::chrono::steady_clock;
  const std::string base_url_;
  const HttpGetOptions options_;
  std::mutex mu_;
  std::vector<std::pair<std::unique_ptr<HttpGetter>, Clock::time_point>> kept_;
};

}  // namespace hlocache
