#include "common/http_get.h"

#include <strings.h>

#include <cstdlib>

#include "common/curl_library.h"

namespace hlocache {
namespace {

CURL* Handle(void* curl) { return static_cast<CURL*>(curl); }

}  // namespace

struct HttpGetter::Transfer {
  const OnStart* on_start = nullptr;
  const OnBody* on_body = nullptr;
  CURL* curl = nullptr;
  std::optional<uint64_t> content_length;
  bool started = false;  // on_start was called.
  bool stopped = false;  // A callback said to stop.
  int status = 0;
  char error[CURL_ERROR_SIZE] = {};

  static size_t OnHeader(char* data, size_t, size_t size, void* self) {
    auto& t = *static_cast<Transfer*>(self);
    std::string_view line(data, size);
    if (line.starts_with("HTTP/")) {
      // A new response (after a 100 Continue, say): forget the last one's headers.
      t.content_length.reset();
      return size;
    }
    constexpr std::string_view kLength = "content-length:";
    if (line.size() > kLength.size() &&
        ::strncasecmp(line.data(), kLength.data(), kLength.size()) == 0) {
      const std::string value(line.substr(kLength.size()));
      char* end = nullptr;
      const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
      while (end != nullptr && (*end == ' ' || *end == '\r' || *end == '\n')) ++end;
      if (end != nullptr && *end == '\0' && end != value.c_str()) t.content_length = n;
      return size;
    }
    if (line == "\r\n" || line == "\n") {
      long code = 0;
      Curl().easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
      if (code >= 100 && code < 200) return size;  // An interim answer; the real one follows.
      t.status = static_cast<int>(code);
      t.started = true;
      if (t.on_start != nullptr && !(*t.on_start)(t.status, t.content_length)) {
        t.stopped = true;
        return 0;
      }
    }
    return size;
  }

  static size_t OnData(char* data, size_t, size_t size, void* self) {
    auto& t = *static_cast<Transfer*>(self);
    if (t.on_body != nullptr && !(*t.on_body)(std::string_view(data, size))) {
      t.stopped = true;
      return 0;
    }
    return size;
  }
};

HttpGetter::HttpGetter(std::string base_url, HttpGetOptions options)
    : base_url_(std::move(base_url)), options_(std::move(options)) {
  const CurlLibrary* library = LoadCurl();
  CURL* curl = library != nullptr ? library->easy_init() : nullptr;
  curl_ = curl;
  if (curl == nullptr) return;  // Every request then fails with a clear error.
  Curl().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  Curl().easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  Curl().easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  Curl().easy_setopt(curl, CURLOPT_PROXY, "");  // Never a proxy from the environment.
  Curl().easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  Curl().easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  Curl().easy_setopt(curl, CURLOPT_BUFFERSIZE, static_cast<long>(kReceiveBufferBytes));
  Curl().easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::max<int64_t>(1, options_.connect_timeout.count())));
  const int64_t stall_ms = options_.stall_timeout.count();
  Curl().easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  Curl().easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(1, (stall_ms + 999) / 1000)));
  Curl().easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  Curl().easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_cert.empty()) Curl().easy_setopt(curl, CURLOPT_CAINFO, options_.ca_cert.c_str());
  curl_slist* headers = nullptr;
  if (!options_.bearer_token.empty()) {
    headers =
        Curl().slist_append(headers, ("Authorization: Bearer " + options_.bearer_token).c_str());
  }
  for (const auto& [name, value] : options_.headers) {
    headers = Curl().slist_append(headers, (name + ": " + value).c_str());
  }
  headers_ = headers;
  if (headers != nullptr) Curl().easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  Curl().easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  Curl().easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnData);
}

HttpGetter::~HttpGetter() {
  if (curl_ != nullptr) Curl().easy_cleanup(Handle(curl_));
  if (headers_ != nullptr) Curl().slist_free_all(static_cast<curl_slist*>(headers_));
}

Result<int> HttpGetter::Perform(std::string_view path, bool head, Transfer& transfer) {
  const std::string url = base_url_ + std::string(path);
  if (curl_ == nullptr) {
    std::string why = "cannot set up libcurl";
    LoadCurl(&why);
    return Error(Unavailable(url + ": " + why));
  }
  CURL* curl = Handle(curl_);
  transfer.curl = curl;
  Curl().easy_setopt(curl, CURLOPT_URL, url.c_str());
  if (head) {
    Curl().easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else {
    Curl().easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  Curl().easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  Curl().easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  Curl().easy_setopt(curl, CURLOPT_ERRORBUFFER, transfer.error);
  const CURLcode code = Curl().easy_perform(curl);
  Curl().easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  if (transfer.stopped) return transfer.status;
  if (code != CURLE_OK) {
    const std::string detail =
        transfer.error[0] != '\0' ? transfer.error : Curl().easy_strerror(code);
    return Error(Unavailable(url + ": " + detail));
  }
  if (!transfer.started) {
    long status = 0;
    Curl().easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    transfer.status = static_cast<int>(status);
  }
  return transfer.status;
}

Result<int> HttpGetter::Get(std::string_view path, const OnStart& on_start, const OnBody& on_body) {
  Transfer transfer;
  transfer.on_start = &on_start;
  transfer.on_body = &on_body;
  return Perform(path, /*head=*/false, transfer);
}

Result<std::pair<int, std::string>> HttpGetter::GetWhole(std::string_view path) {
  std::string body;
  const OnStart on_start = [&](int, std::optional<uint64_t> length) {
    if (length && *length <= (uint64_t{64} << 20)) body.reserve(*length);
    return true;
  };
  const OnBody on_body = [&](std::string_view bytes) {
    body.append(bytes);
    return true;
  };
  HLOCACHE_ASSIGN_OR_RETURN(int status, Get(path, on_start, on_body));
  return std::make_pair(status, std::move(body));
}

Result<HttpHead> HttpGetter::Head(std::string_view path) {
  Transfer transfer;
  HLOCACHE_ASSIGN_OR_RETURN(int status, Perform(path, /*head=*/true, transfer));
  return HttpHead{status, transfer.content_length};
}

std::unique_ptr<HttpGetter> HttpGetterPool::Take() {
  const auto now = Clock::now();
  std::unique_ptr<HttpGetter> getter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!kept_.empty() && !getter) {
      auto [kept, since] = std::move(kept_.back());
      kept_.pop_back();
      if (now - since <= kMostIdle) getter = std::move(kept);
    }
  }
  if (!getter) getter = std::make_unique<HttpGetter>(base_url_, options_);
  return getter;
}

void HttpGetterPool::GiveBack(std::unique_ptr<HttpGetter> getter) {
  if (!getter) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (kept_.size() < kMostKept) kept_.emplace_back(std::move(getter), Clock::now());
}

}  // namespace hlocache
