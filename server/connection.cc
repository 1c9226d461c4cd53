#include "server/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/trace.h"
#include "server/header_check.h"

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadBufferBytes = 16 << 10;
constexpr size_t kWriteBufferBytes = 64 << 10;
// How often a connection waiting for its next request checks whether the server is stopping.
constexpr milliseconds kStopCheck{100};
// The slowest a request body may arrive, on average (Apache's mod_reqtimeout uses 500 too).
constexpr uint64_t kMinBodyBytesPerSecond = 500;
// How long a refused body is read and dropped before the connection is closed.
constexpr milliseconds kLinger{2000};

std::string AddressText(const sockaddr_storage& addr, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    port = ntohs(v4->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    port = ntohs(v6->sin6_port);
  }
  return text;
}

std::atomic<uint64_t> g_connections{0};

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, milliseconds read_timeout, milliseconds write_timeout,
                   milliseconds header_timeout)
      : sock_(sock),
        read_timeout_(read_timeout),
        write_timeout_(write_timeout),
        header_timeout_(header_timeout) {
    if (TraceEnabled()) {
      std::snprintf(trace_area_, sizeof trace_area_, "conn %llu",
                    static_cast<unsigned long long>(g_connections.fetch_add(1) + 1));
    }
    // A client that stops reading makes send() give up after the write timeout.
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(write_timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((write_timeout.count() % 1000) * 1000);
    ::setsockopt(sock_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      remote_ip_ = AddressText(addr, remote_port_);
    }
    TraceIo("accepted from %s:%d", remote_ip_.c_str(), remote_port_);
  }

  // Waits for the first byte of the next request: false when the connection closed, stayed
  // idle for `idle`, or `stopping` became true.
  template <typename Stopping>
  bool WaitForRequest(milliseconds idle, Stopping stopping) {
    if (in_pos_ < in_len_) return true;  // Pipelined.
    const auto deadline = Clock::now() + idle;
    while (!stopping()) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        TraceIo("idle for %lld ms: closing", static_cast<long long>(idle.count()));
        return false;
      }
      const int ready = Poll(POLLIN, std::min(left, kStopCheck));
      if (ready < 0) {
        TraceIo("poll while idle: %s", std::strerror(errno));
        return false;
      }
      if (ready > 0) return true;
    }
    TraceIo("the server is stopping: closing an idle connection");
    return false;
  }

  // A request begins: its line and headers must all arrive within the header timeout.
  // It has no body until its headers announce one.
  void StartRequest() {
    headers_deadline_ = Clock::now() + header_timeout_;
    reading_headers_ = true;
    head_check_.Reset();
    request_bytes_ = 0;
    failure_.clear();
    BodyAnnounced(0, false);
    TraceIo("request begins");
  }
  void HeadersRead() {
    reading_headers_ = false;
    TraceIo("headers read");
  }

  // The request's headers announce a body: `length` bytes, or chunked. A handler that answers
  // without reading all of it (a refused upload) leaves the rest in the connection, where it
  // would be read as the next request: such a connection is closed after the reply.
  void BodyAnnounced(uint64_t length, bool chunked) {
    body_length_ = length;
    body_chunked_ = chunked;
    body_read_ = 0;
    client_wait_ = milliseconds(0);
    if (length > 0 || chunked) {
      TraceIo("request announces a body of %llu bytes%s", static_cast<unsigned long long>(length),
              chunked ? " (chunked)" : "");
    }
  }
  bool BodyLeftUnread() const { return body_chunked_ || body_read_ < body_length_; }

  void TraceRequestEnd(bool ok, bool closed) const {
    TraceIo("request ends: %s%s; %llu bytes of body read, %lld ms waiting for them",
            ok ? "answered" : "not answered", closed ? ", connection closing" : "",
            static_cast<unsigned long long>(body_read_),
            static_cast<long long>(client_wait_.count()));
  }

  // Why the connection failed during the current request (a deadline passed, the client went
  // away mid-request, a send failed); empty when it did not. A client that closes an idle
  // connection is not a failure.
  const std::string& failure() const { return failure_; }

  // Before closing a connection whose client may still be sending a body we did not read:
  // stop sending, then read and drop what arrives for up to `linger`, until the client closes.
  // Closing at once, with bytes unread, would reset the connection, and a client still
  // sending would lose the reply (and a client without MSG_NOSIGNAL its life, to SIGPIPE).
  void Linger(milliseconds linger) {
    ::shutdown(sock_, SHUT_WR);
    const auto deadline = Clock::now() + linger;
    TraceIo("lingering up to %lld ms for an unread body", static_cast<long long>(linger.count()));
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || Poll(POLLIN, left) <= 0) return;
      if (Recv(in_, kReadBufferBytes, 0) <= 0) return;
    }
  }

  // Sends what is buffered. False when the client is gone or stopped reading.
  bool Flush() {
    const bool ok = SendAll(out_.data(), out_.size());
    out_.clear();
    return ok;
  }

  bool is_readable() const override { return in_pos_ < in_len_ || WaitReadable(); }
  bool is_writable() const override { return Poll(POLLOUT, write_timeout_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    const ssize_t n = ReadSome(ptr, size);
    if (n > 0 && reading_headers_ && !head_check_.done()) {
      if (auto refusal = head_check_.Feed(std::string_view(ptr, static_cast<size_t>(n)))) {
        Refuse(*refusal);
        return -1;  // The library stops reading this request; the connection closes.
      }
    }
    if (n > 0) body_read_ += static_cast<uint64_t>(n);
    return n;
  }

  // Answers a request whose head failed HeaderCheck, before the library has parsed it.
  void Refuse(const HeaderCheck::Refusal& refusal) {
    const std::string body = "error: " + refusal.reason + "\n";
    const char* phrase = refusal.status == 431 ? "Request Header Fields Too Large" : "Bad Request";
    out_ += "HTTP/1.1 " + std::to_string(refusal.status) + " " + phrase +
            "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nConnection: close\r\n\r\n" + body;
    TraceIo("request refused with %d: %s", refusal.status, refusal.reason.c_str());
    (void)Flush();
  }

  ssize_t ReadSome(char* ptr, size_t size) {
    if (in_pos_ < in_len_) {
      const size_t n = std::min(size, in_len_ - in_pos_);
      std::memcpy(ptr, in_ + in_pos_, n);
      in_pos_ += n;
      return static_cast<ssize_t>(n);
    }
    // About to wait for the client: whatever it is waiting for (a 100 Continue) goes first.
    if (!out_.empty() && !Flush()) return -1;
    char* into = size >= kReadBufferBytes ? ptr : in_;
    const size_t want = size >= kReadBufferBytes ? size : kReadBufferBytes;
    // Bytes that are already there are taken without a poll(); only a wait is timed.
    ssize_t got = Recv(into, want, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitReadable()) return -1;
      got = Recv(into, want, 0);
    }
    if (got < 0) {
      Fail(std::string("recv: ") + std::strerror(errno));
    } else if (got == 0 && request_bytes_ > 0) {
      Fail("the client closed the connection after " + std::to_string(request_bytes_) +
           " bytes of the request");
    }
    if (got > 0) request_bytes_ += static_cast<uint64_t>(got);
    if (into == ptr || got <= 0) return got;
    in_len_ = static_cast<size_t>(got);
    in_pos_ = std::min(size, in_len_);
    std::memcpy(ptr, in_, in_pos_);
    return static_cast<ssize_t>(in_pos_);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (out_.size() + size <= kWriteBufferBytes) {
      out_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    if (!Flush()) return -1;
    if (size <= kWriteBufferBytes) {
      out_.append(ptr, size);
    } else if (!SendAll(ptr, size)) {
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  // Taken once, when the connection starts: after the client has gone, getpeername fails, and
  // a request it cut short could not say whose it was.
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ip = AddressText(addr, port);
    }
  }
  socket_t socket() const override { return sock_; }

 private:
  // poll() for `events`, retried on EINTR: >0 ready, 0 timed out, <0 error.
  int Poll(short events, milliseconds timeout) const {
    pollfd p{sock_, events, 0};
    const auto deadline = Clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (r >= 0 || errno != EINTR) return r;
    }
  }

  // Waits for bytes within the read timeout; while a request's headers are arriving, within
  // their deadline; while its body is, at no less than kMinBodyBytesPerSecond on average after
  // a grace of the header timeout (a trickled body would otherwise hold a thread for good).
  // Only the time spent here, waiting for the client, counts against the body's rate: while
  // the server stores what it has read (a synced write, a compaction stall) the client is
  // not being slow, it is being made to wait.
  bool WaitReadable() const {
    while (true) {
      milliseconds timeout = read_timeout_;
      bool deadline_first = false;
      milliseconds left{};
      if (reading_headers_) {
        left = std::chrono::duration_cast<milliseconds>(headers_deadline_ - Clock::now());
      } else {
        const milliseconds allowance =
            header_timeout_ + milliseconds(body_read_ * 1000 / kMinBodyBytesPerSecond);
        left = allowance - client_wait_;
      }
      if (left.count() <= 0) {
        Fail(reading_headers_
                 ? "its line and headers took longer than " +
                       std::to_string(header_timeout_.count()) + " ms"
                 : "its body arrived slower than " + std::to_string(kMinBodyBytesPerSecond) +
                       " bytes/s (" + std::to_string(body_read_) + " bytes read in " +
                       std::to_string(client_wait_.count()) + " ms of waiting for them)");
        return false;
      }
      if (left < timeout) {
        timeout = left;
        deadline_first = true;
      }
      const auto start = Clock::now();
      const int ready = Poll(POLLIN, timeout);
      const int poll_errno = errno;
      const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      if (!reading_headers_) client_wait_ += waited;
      TraceIo("waited %lld ms for the client (%s): %s", static_cast<long long>(waited.count()),
              reading_headers_ ? "headers" : "body",
              ready > 0    ? "readable"
              : ready == 0 ? "timed out"
                           : std::strerror(poll_errno));
      if (ready > 0) return true;
      if (ready < 0) {
        Fail(std::string("poll: ") + std::strerror(poll_errno));
        return false;
      }
      if (!deadline_first) {
        Fail("no byte arrived for " + std::to_string(read_timeout_.count()) + " ms");
        return false;
      }
      // The deadline came first: the next round says which.
    }
  }

  void Fail(std::string why) const {
    TraceIo("request fails: %s", why.c_str());
    if (failure_.empty()) failure_ = std::move(why);
  }

  template <typename... Args>
  void TraceIo(const char* format, Args... args) const {
    if (trace_area_[0] == '\0') return;
    if constexpr (sizeof...(args) == 0) {
      Trace(trace_area_, "%s", format);  // A format with no arguments is printed as it is.
    } else {
      Trace(trace_area_, format, args...);
    }
  }

  ssize_t Recv(char* ptr, size_t size, int flags) {
    while (true) {
      const ssize_t n = ::recv(sock_, ptr, size, flags);
      if (n >= 0 || errno != EINTR) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && (flags & MSG_DONTWAIT)) {
          return n;  // Nothing waiting: a wait follows, and is traced there.
        }
        const int saved = errno;
        if (n < 0) {
          TraceIo("recv: -1 (%s)", std::strerror(saved));
        } else {
          TraceIo("recv: %zd bytes", n);
        }
        errno = saved;
        return n;
      }
    }
  }

  bool SendAll(const char* data, size_t size) {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = ::send(sock_, data + sent, size - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (trace_area_[0] != '\0') {
        const int saved = errno;
        if (n < 0) {
          TraceIo("send: -1 (%s)", std::strerror(saved));
        } else {
          TraceIo("send: %zd of %zu bytes", n, size - sent);
        }
        errno = saved;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        Fail("the client read nothing for " + std::to_string(write_timeout_.count()) + " ms");
        return false;
      }
      if (n <= 0) {  // Gone.
        Fail(std::string("send: ") + std::strerror(errno));
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  const int sock_;
  const milliseconds read_timeout_, write_timeout_, header_timeout_;
  Clock::time_point headers_deadline_;
  bool reading_headers_ = false;
  HeaderCheck head_check_;  // The current request's head, as it arrives.
  uint64_t body_length_ = 0, body_read_ = 0, request_bytes_ = 0;
  mutable std::string failure_;
  std::string remote_ip_;
  int remote_port_ = 0;
  bool body_chunked_ = false;
  // Time spent waiting for this request's body to arrive: what the body-rate bound counts.
  mutable milliseconds client_wait_{0};
  char trace_area_[32] = {};  // Empty unless tracing.
  char in_[kReadBufferBytes];
  size_t in_pos_ = 0, in_len_ = 0;
  std::string out_;
};

thread_local ConnectionStream* t_stream = nullptr;

milliseconds ToMillis(time_t seconds, time_t micros) {
  return milliseconds(seconds * 1000 + micros / 1000);
}

}  // namespace

void MarkRequestHeadersRead() {
  if (t_stream != nullptr) t_stream->HeadersRead();
}

bool RequestBodyLeftUnread() { return t_stream != nullptr && t_stream->BodyLeftUnread(); }

bool PlainServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  {
    ConnectionStream stream(sock, ToMillis(read_timeout_sec_, read_timeout_usec_),
                            ToMillis(write_timeout_sec_, write_timeout_usec_), header_timeout_);
    t_stream = &stream;
    const milliseconds idle(keep_alive_timeout_sec_ * 1000);
    auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
    for (size_t left = keep_alive_max_count_; left > 0 && stream.WaitForRequest(idle, stopping);
         --left) {
      stream.StartRequest();
      bool closed = false;
      ok = process_request(
          stream, /*close_connection=*/left == 1, closed, [&stream](httplib::Request& req) {
            const bool chunked = req.has_header("Transfer-Encoding");
            const uint64_t length =
                std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
            stream.BodyAnnounced(length, chunked);
          });
      if (!stream.Flush()) ok = false;
      stream.TraceRequestEnd(ok, closed);
      if (!stream.failure().empty() && cut_short_) {
        std::string ip;
        int port = 0;
        stream.get_remote_ip_and_port(ip, port);
        cut_short_(ip + ":" + std::to_string(port), stream.failure());
      }
      if (ok && stream.BodyLeftUnread()) {
        stream.Linger(kLinger);
        break;
      }
      if (!ok || closed) break;
    }
    t_stream = nullptr;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace hlocache::server
