#include "storage/s3_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

#include "common/curl_library.h"

namespace hlocache::storage {
namespace {

bool HeaderIs(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' &&
         ::strncasecmp(line.data(), name.data(), name.size()) == 0;
}

std::string HeaderValue(std::string_view line, size_t name_size) {
  std::string_view v = line.substr(name_size + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
    v.remove_suffix(1);
  }
  return std::string(v);
}

}  // namespace

std::string UriEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '_' || u == '.' || u == '~' || (keep_slash && u == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = UriEncode(name, false);
    value = UriEncode(value, false);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string XmlElement(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const size_t a = xml.find(open);
  if (a == std::string_view::npos) return "";
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string_view::npos) return "";
  return std::string(xml.substr(a + open.size(), b - a - open.size()));
}

// Acknowledges what has arrived at once instead of after the delayed-ACK timer. A gateway
// that leaves Nagle's algorithm on (Ceph's RADOS Gateway by default: beast's tcp_nodelay=0)
// writes an answer's headers, then holds a body shorter than a segment until the headers are
// acknowledged; on a kept connection Linux delays that ACK by 40 ms, and every small read
// would wait for it. Linux clears the flag on its own, so it is set again as each piece
// arrives.
void AckNow(int fd) {
  if (fd < 0) return;
  const int on = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof(on));
}

// libcurl's socket callback: notes the connection's socket (libcurl does not say which socket
// a transfer uses until it is over).
int NoteSocket(void* socket_out, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) {
    *static_cast<int*>(socket_out) = static_cast<int>(fd);
    AckNow(static_cast<int>(fd));
  }
  return CURL_SOCKOPT_OK;
}

struct S3Connection::Transfer {
  const S3Request* request = nullptr;
  S3Reply* reply = nullptr;
  CURL* curl = nullptr;
  const int* socket = nullptr;  // The connection's (S3Connection::socket_), set as it opens.
  std::string_view unsent;      // What is left of the body to send.
  bool started = false;

  static size_t OnHeader(char* data, size_t, size_t size, void* self) {
    auto& t = *static_cast<Transfer*>(self);
    const std::string_view line(data, size);
    S3Reply& r = *t.reply;
    if (line.starts_with("HTTP/")) {  // A new response (after a 100 Continue): start again.
      r.content_length.reset();
      r.range_total.reset();
      r.etag.clear();
      r.last_modified.clear();
      r.meta_sum.clear();
      return size;
    }
    if (HeaderIs(line, "content-length")) {
      const std::string v = HeaderValue(line, 14);
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (end != v.c_str() && *end == '\0') r.content_length = n;
    } else if (HeaderIs(line, "content-range")) {
      const std::string v = HeaderValue(line, 13);
      const size_t slash = v.rfind('/');
      if (slash != std::string::npos) {
        char* end = nullptr;
        const unsigned long long n = std::strtoull(v.c_str() + slash + 1, &end, 10);
        if (end != v.c_str() + slash + 1 && *end == '\0') r.range_total = n;
      }
    } else if (HeaderIs(line, "etag")) {
      r.etag = HeaderValue(line, 4);
    } else if (HeaderIs(line, "last-modified")) {
      r.last_modified = HeaderValue(line, 13);
    } else if (HeaderIs(line, "x-amz-meta-hlocache-xxh3")) {
      r.meta_sum = HeaderValue(line, 24);
    } else if (line == "\r\n" || line == "\n") {
      AckNow(*t.socket);
      long code = 0;
      Curl().easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &code);
      if (code >= 100 && code < 200) return size;  // Interim; the real answer follows.
      r.status = static_cast<int>(code);
      t.started = true;
      if (t.request->on_start && !t.request->on_start(r)) {
        r.stopped = true;
        return 0;
      }
    }
    return size;
  }

  static size_t OnData(char* data, size_t, size_t size, void* self) {
    auto& t = *static_cast<Transfer*>(self);
    AckNow(*t.socket);
    if (t.request->on_body && t.reply->status >= 200 && t.reply->status < 300) {
      if (!t.request->on_body(std::string_view(data, size))) {
        t.reply->stopped = true;
        return 0;
      }
      return size;
    }
    // An error's XML (kept short: it is only read for its <Code>), or a body kept whole.
    if (t.request->on_body == nullptr || t.reply->body.size() < 64 * 1024) {
      t.reply->body.append(data, size);
    }
    return size;
  }

  static size_t OnRead(char* buffer, size_t, size_t size, void* self) {
    auto& t = *static_cast<Transfer*>(self);
    const size_t n = std::min(size, t.unsent.size());
    std::copy_n(t.unsent.data(), n, buffer);
    t.unsent.remove_prefix(n);
    return n;
  }
};

S3Connection::S3Connection(const S3ConnectionOptions& options) : options_(options) {
  const CurlLibrary* library = LoadCurl();
  curl_ = library != nullptr ? library->easy_init() : nullptr;
}

S3Connection::~S3Connection() {
  if (curl_ != nullptr) Curl().easy_cleanup(static_cast<CURL*>(curl_));
}

Result<S3Reply> S3Connection::Perform(const S3Request& request) {
  const std::string url = request.query.empty() ? request.url : request.url + "?" + request.query;
  if (curl_ == nullptr) {
    std::string why = "cannot set up libcurl";
    LoadCurl(&why);
    return Error(Unavailable(request.url + ": " + why));
  }
  CURL* curl = static_cast<CURL*>(curl_);
  Curl().easy_reset(curl);  // Keeps the open connections; forgets the last request's options.
  Curl().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  Curl().easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  Curl().easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  Curl().easy_setopt(curl, CURLOPT_PROXY, "");
  Curl().easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  Curl().easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  Curl().easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  Curl().easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::max<int64_t>(1, options_.connect_timeout.count())));
  Curl().easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  Curl().easy_setopt(
      curl, CURLOPT_LOW_SPEED_TIME,
      static_cast<long>(std::max<int64_t>(1, (options_.stall_timeout.count() + 999) / 1000)));
  Curl().easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  Curl().easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_cert.empty()) Curl().easy_setopt(curl, CURLOPT_CAINFO, options_.ca_cert.c_str());
  const std::string sigv4 = "aws:amz:" + options_.region + ":s3";
  Curl().easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
  Curl().easy_setopt(curl, CURLOPT_USERNAME, options_.credentials.access_key_id.c_str());
  Curl().easy_setopt(curl, CURLOPT_PASSWORD, options_.credentials.secret_access_key.c_str());
  Curl().easy_setopt(curl, CURLOPT_URL, url.c_str());

  curl_slist* headers = nullptr;
  headers = Curl().slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!options_.credentials.session_token.empty()) {
    headers = Curl().slist_append(
        headers, ("x-amz-security-token: " + options_.credentials.session_token).c_str());
  }
  for (const auto& [name, value] : request.headers) {
    headers = Curl().slist_append(headers, (name + ": " + value).c_str());
  }

  S3Reply reply;
  Transfer transfer;
  transfer.request = &request;
  transfer.reply = &reply;
  transfer.curl = curl;
  transfer.socket = &socket_;
  transfer.unsent = request.body;
  Curl().easy_setopt(curl, CURLOPT_SOCKOPTFUNCTION, &NoteSocket);
  Curl().easy_setopt(curl, CURLOPT_SOCKOPTDATA, &socket_);
  if (request.method == "HEAD") {
    Curl().easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    Curl().easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    Curl().easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    Curl().easy_setopt(curl, CURLOPT_READFUNCTION, &Transfer::OnRead);
    Curl().easy_setopt(curl, CURLOPT_READDATA, &transfer);
  } else if (request.method == "POST") {
    Curl().easy_setopt(curl, CURLOPT_POST, 1L);
    Curl().easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    Curl().easy_setopt(curl, CURLOPT_READFUNCTION, &Transfer::OnRead);
    Curl().easy_setopt(curl, CURLOPT_READDATA, &transfer);
  } else if (request.method != "GET") {
    Curl().easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  Curl().easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  Curl().easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  Curl().easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  Curl().easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnData);
  Curl().easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  char error[CURL_ERROR_SIZE] = {};
  Curl().easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = Curl().easy_perform(curl);
  Curl().easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  Curl().easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  Curl().slist_free_all(headers);
  if (reply.stopped) return reply;
  if (code != CURLE_OK) {
    return Error(Unavailable(request.method + " " + request.url + ": " +
                             (error[0] != '\0' ? error : Curl().easy_strerror(code))));
  }
  if (!transfer.started) {
    long status = 0;
    Curl().easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    reply.status = static_cast<int>(status);
  }
  return reply;
}

std::unique_ptr<S3Connection> S3ConnectionPool::Take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!kept_.empty()) {
      auto c = std::move(kept_.back());
      kept_.pop_back();
      return c;
    }
  }
  return std::make_unique<S3Connection>(options_);
}

void S3ConnectionPool::GiveBack(std::unique_ptr<S3Connection> connection) {
  if (!connection) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (kept_.size() < kMostKept) kept_.push_back(std::move(connection));
}

}  // namespace hlocache::storage
