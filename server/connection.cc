#include "server/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/trace.h"
#include "server/header_check.h"
#include "server/quick_request.h"

namespace hlocache::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadBufferBytes = 16 << 10;
constexpr size_t kWriteBufferBytes = 64 << 10;
// Written pieces at least this large are sent from the caller's buffer instead of copied.
constexpr size_t kGatheredPieceBytes = 2 << 10;
// How often idle connections are checked against the keep-alive timeout.
constexpr milliseconds kReapEvery{100};
// How long every listener may be on a request before a spare thread starts listening.
constexpr milliseconds kSpareAfter{2};
// How often the reaper looks whether every listener is on a request, while some are. Each look
// wakes it on a core the requests want: looking every kSpareAfter (500 times a second under
// any load) put the p99 of 4 KiB hits at 8 connections at 1.46 ms, every 20 ms at 1.20 (eight
// rounds of 3 s alternating, same machine; throughput unchanged, 33.8k and 33.3k requests/s).
// A spare then starts at most this much later when every listener is held up.
constexpr milliseconds kWatchEvery{20};
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

thread_local FileBackedBytes* t_file_backed = nullptr;  // The innermost alive on this thread.

// A pipe of this thread's through which a file's pages go to a socket with splice(), as
// sendfile() sends them, but in pieces of up to 1 MiB: sendfile goes through a pipe of its own of
// 64 KiB, and each piece is a send of its own that wakes the client. Measured with 1 MiB hits over
// loopback (wrk, 8 connections, 2 cores): 3.3k to 4.1k requests/s through this pipe against 2.4k
// to 2.9k with sendfile (nginx, which sends with sendfile, 2.3k to 2.6k in the same rounds); at 64
// connections level in one run, 6.3k to 7.0k against 4.6k to 4.7k in another (bench/README).
class SplicePipe {
 public:
  static constexpr int kBytes = 1 << 20;
  // The least worth having: with less, sendfile's own pipe does as well.
  static constexpr int kLeastBytes = 256 << 10;

  SplicePipe() = default;
  ~SplicePipe() { Close(); }
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;

  // Opens it if it is not open; false when the system gives no pipe of kLeastBytes (out of
  // descriptors, or past an unprivileged user's pipe budget, fs.pipe-user-pages-soft).
  bool Open() {
    if (read_end_ >= 0) return true;
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) return false;
    read_end_ = ends[0];
    write_end_ = ends[1];
    if (::fcntl(write_end_, F_SETPIPE_SZ, kBytes) < kLeastBytes) {
      Close();
      return false;
    }
    return true;
  }
  // After a send failed with bytes still in it: they must not go to the next socket.
  void Close() {
    if (read_end_ < 0) return;
    ::close(read_end_);
    ::close(write_end_);
    read_end_ = write_end_ = -1;
  }
  int read_end() const { return read_end_; }
  int write_end() const { return write_end_; }

 private:
  int read_end_ = -1, write_end_ = -1;
};

thread_local SplicePipe t_splice_pipe;

// Names the calling thread as a pool thread: what `top -H`, perf and /proc show.
void BecomePoolThread() { ::pthread_setname_np(::pthread_self(), "hlocache-pool"); }

}  // namespace

FileBackedBytes::FileBackedBytes(std::span<const char> bytes, int fd)
    : bytes_(bytes), fd_(fd), outer_(t_file_backed) {
  t_file_backed = this;
}

FileBackedBytes::~FileBackedBytes() { t_file_backed = outer_; }

int64_t FileBackedBytes::OffsetOf(const char* data, size_t size, int& fd) {
  const FileBackedBytes* inner = t_file_backed;
  if (inner == nullptr) return -1;
  // Compared as addresses: `data` may point anywhere.
  const auto begin = reinterpret_cast<uintptr_t>(inner->bytes_.data());
  const auto at = reinterpret_cast<uintptr_t>(data);
  if (at < begin || at - begin > inner->bytes_.size() ||
      size > inner->bytes_.size() - (at - begin)) {
    return -1;
  }
  fd = inner->fd_;
  return static_cast<int64_t>(at - begin);
}

// Named, not anonymous: PlainServer::Connection, declared in the header, holds one.
namespace connection_internal {

// What a stream calls before it may hold its thread a while (waiting for its client to take a
// reply, sending a large one): the connections its thread claimed with this one and has not
// begun go back to the epoll set (PlainServer::Batch). Calling it again does nothing.
class BeforeHolding {
 public:
  virtual void HandBackTheRest() = 0;

 protected:
  ~BeforeHolding() = default;
};

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

  // Bytes of a next request already read (pipelined).
  bool HasBuffered() const { return in_pos_ < in_len_; }
  void TraceClose(const char* why) const { TraceIo("%s", why); }

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
    client_wait_ = Clock::duration::zero();
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
            static_cast<long long>(std::chrono::duration_cast<milliseconds>(client_wait_).count()));
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

  enum class Quick { kNo, kAnswered, kAnsweredAndClose, kFailed };

  // Offers the request at the head of the connection to `answerer`, when it is a QuickRequest
  // whose head has all arrived (taking what the socket holds, without waiting, when nothing is
  // buffered), and sends the reply it makes. kNo leaves the request, and every byte of it, to
  // the library; kAnsweredAndClose: the request asked to close the connection after it, or is
  // the `last` it may carry;
  // kFailed: the reply did not all go out (the connection must close). `others` is told before
  // a large reply goes out, or before a small one waits for the client to make room.
  Quick TryQuick(QuickAnswerer& answerer, std::string_view keep_alive, bool last,
                 BeforeHolding& others) {
    if (in_pos_ == in_len_) {
      const ssize_t got = Recv(in_, kReadBufferBytes, MSG_DONTWAIT);
      if (got <= 0) {
        // Nothing yet, the client's close or an error: the library's read meets them next,
        // and an error is recorded as its read would have.
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          Fail(std::string("recv: ") + std::strerror(errno));
        }
        return Quick::kNo;
      }
      in_pos_ = 0;
      in_len_ = static_cast<size_t>(got);
      request_bytes_ += static_cast<uint64_t>(got);
    }
    const auto head = ParseQuickHead(std::string_view(in_ + in_pos_, in_len_ - in_pos_));
    if (!head) return Quick::kNo;
    const bool close = head->close || last;
    const QuickRequest request{.head_only = head->head_only,
                               .path = head->path,
                               .authorization = head->authorization,
                               .accept_encoding = head->accept_encoding,
                               .file_namespace = head->file_namespace,
                               .remote_ip = remote_ip_,
                               .keep_alive = close ? std::string_view() : keep_alive};
    QuickReply reply;
    if (!answerer.Answer(request, reply)) return Quick::kNo;
    // The head stays in the buffer, unchanged until the next read, for `request`'s views.
    in_pos_ += head->length;
    TraceIo("answered on the quick path");
    bool sent = false;
    const size_t body_size = request.head_only ? 0 : reply.body.size();
    if (body_size > kWriteBufferBytes) others.HandBackTheRest();
    if (request.head_only) {
      sent = SendAll(reply.head.data(), reply.head.size(), nullptr, 0, 0, &others);
    } else if (reply.body_fd >= 0 && body_size > kWriteBufferBytes) {
      out_ = reply.head;
      sent = SendFromFile(reply.body_fd, reply.body_offset, body_size);
      out_.clear();
    } else {
      // Head and body copied from memory, in one sendmsg while the socket takes them: a small
      // body, which from a file would take a call of its own, or a large one without a file
      // (ServerOptions::zero_copy says why that is the default).
      sent =
          SendAll(reply.head.data(), reply.head.size(), reply.body.data(), body_size, 0, &others);
    }
    answerer.Done(request, reply, sent);
    if (!sent) return Quick::kFailed;
    return close ? Quick::kAnsweredAndClose : Quick::kAnswered;
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
    // Small pieces (a status line, a header) are gathered; a larger one (a body) goes out at
    // once with what was gathered before it, in one sendmsg, without being copied.
    if (size < kGatheredPieceBytes && out_.size() + size <= kWriteBufferBytes) {
      out_.append(ptr, size);
      return static_cast<ssize_t>(size);
    }
    int fd = -1;
    const int64_t offset = FileBackedBytes::OffsetOf(ptr, size, fd);
    const bool ok =
        offset >= 0 ? SendFromFile(fd, offset, size) : SendAll(out_.data(), out_.size(), ptr, size);
    out_.clear();
    return ok ? static_cast<ssize_t>(size) : -1;
  }

  // Taken once, when the connection starts: after the client has gone, getpeername fails, and
  // a request it cut short could not say whose it was.
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  // Asked for by the library on every request: read once per connection (a getsockname() a
  // request was one system call in six of a keep-alive hit).
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (!local_known_) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
      local_ip_ = AddressText(addr, local_port_);
      local_known_ = true;
    }
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return sock_; }

 private:
  // poll() for `events`, retried on EINTR: >0 ready, 0 timed out, <0 error.
  int Poll(short events, milliseconds timeout) const {
    pollfd p{sock_, events, 0};
    const auto deadline = Clock::now() + timeout;
    while (true) {
      // Rounded up: a wait of under a millisecond left is a wait of one, not a poll that
      // returns at once.
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
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
        left = std::chrono::ceil<milliseconds>(allowance - client_wait_);
      }
      if (left.count() <= 0) {
        Fail(reading_headers_
                 ? "its line and headers took longer than " +
                       std::to_string(header_timeout_.count()) + " ms"
                 : "its body arrived slower than " + std::to_string(kMinBodyBytesPerSecond) +
                       " bytes/s (" + std::to_string(body_read_) + " bytes read in " +
                       std::to_string(
                           std::chrono::duration_cast<milliseconds>(client_wait_).count()) +
                       " ms of waiting for them)");
        return false;
      }
      if (left < timeout) {
        timeout = left;
        deadline_first = true;
      }
      const auto start = Clock::now();
      const int ready = Poll(POLLIN, timeout);
      const int poll_errno = errno;
      const Clock::duration waited = Clock::now() - start;
      if (!reading_headers_) client_wait_ += waited;
      TraceIo("waited %lld ms for the client (%s): %s",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(waited).count()),
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

  // Traces what a send call (`call`, made with `left` bytes to go) returned, and when it
  // failed (-1, not EINTR, which the caller retries) fails the request and returns false: a
  // timeout (EAGAIN) means the client read nothing for the write timeout.
  bool Sent(const char* call, ssize_t n, size_t left) {
    if (trace_area_[0] != '\0') {
      const int saved = errno;
      if (n < 0) {
        TraceIo("%s: -1 (%s)", call, std::strerror(saved));
      } else {
        TraceIo("%s: %zd of %zu bytes", call, n, left);
      }
      errno = saved;
    }
    if (n >= 0) return true;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      Fail("the client read nothing for " + std::to_string(write_timeout_.count()) + " ms");
    } else {
      Fail(std::string(call) + ": " + std::strerror(errno));
    }
    return false;
  }

  bool SendAll(const char* data, size_t size) { return SendAll(data, size, nullptr, 0); }

  // Sends what was gathered, then `size` bytes of `fd` from `offset`: through the thread's
  // splice pipe, or with sendfile when the system gives none.
  bool SendFromFile(int fd, int64_t offset, size_t size) {
    // The head is held back (MSG_MORE) to leave in one segment with the file's first bytes.
    if (!out_.empty() && !SendAll(out_.data(), out_.size(), nullptr, 0, MSG_MORE)) return false;
    if (t_splice_pipe.Open()) return SpliceFromFile(t_splice_pipe, fd, offset, size);
    auto at = static_cast<off_t>(offset);
    size_t left = size;
    while (left > 0) {
      const ssize_t n = ::sendfile(sock_, fd, &at, left);
      if (n < 0 && errno == EINTR) continue;
      if (!Sent("sendfile", n, left)) return false;
      if (n == 0) {  // The file is shorter than it was said to be: never for a sealed one.
        Fail("sendfile: the file ended " + std::to_string(left) + " bytes early");
        return false;
      }
      left -= static_cast<size_t>(n);
    }
    return true;
  }

  // SendFromFile through `pipe`: the file's pages into it, then from it into the socket.
  bool SpliceFromFile(SplicePipe& pipe, int fd, int64_t offset, size_t size) {
    loff_t at = offset;
    size_t left = size;
    while (left > 0) {
      const ssize_t in =
          ::splice(fd, &at, pipe.write_end(), nullptr, left, SPLICE_F_MOVE | SPLICE_F_MORE);
      if (in < 0 && errno == EINTR) continue;
      if (in <= 0) {  // The pipe is empty: what went in went out.
        Fail(in < 0 ? std::string("splice from the file: ") + std::strerror(errno)
                    : "splice: the file ended " + std::to_string(left) + " bytes early");
        return false;
      }
      left -= static_cast<size_t>(in);
      size_t pending = static_cast<size_t>(in);
      while (pending > 0) {
        // More follows (SPLICE_F_MORE, as MSG_MORE) until the last piece.
        const ssize_t out = ::splice(pipe.read_end(), nullptr, sock_, nullptr, pending,
                                     SPLICE_F_MOVE | (left > 0 ? SPLICE_F_MORE : 0));
        if (out < 0 && errno == EINTR) continue;
        if (!Sent("splice", out, pending + left) || out == 0) {
          if (out == 0) Fail("splice: the client is gone");
          pipe.Close();
          return false;
        }
        pending -= static_cast<size_t>(out);
      }
    }
    return true;
  }

  // Sends `first` then `second` (either may be empty), in one sendmsg while both fit. With
  // `before_wait`, it is told before the first send that would wait for the client.
  bool SendAll(const char* first, size_t first_size, const char* second, size_t second_size,
               int flags = 0, BeforeHolding* before_wait = nullptr) {
    iovec iov[2] = {{const_cast<char*>(first), first_size},
                    {const_cast<char*>(second), second_size}};
    size_t left = first_size + second_size;
    int dont_wait = before_wait != nullptr ? MSG_DONTWAIT : 0;
    while (left > 0) {
      msghdr msg{};
      msg.msg_iov = iov[0].iov_len > 0 ? iov : iov + 1;
      msg.msg_iovlen = iov[0].iov_len > 0 ? 2 : 1;
      const ssize_t n = ::sendmsg(sock_, &msg, MSG_NOSIGNAL | flags | dont_wait);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && dont_wait != 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        before_wait->HandBackTheRest();
        dont_wait = 0;  // From here on a send waits, up to the write timeout.
        continue;
      }
      if (!Sent("send", n, left)) return false;
      if (n == 0) {  // Gone.
        Fail(std::string("send: ") + std::strerror(errno));
        return false;
      }
      size_t sent = static_cast<size_t>(n);
      left -= sent;
      for (iovec& v : iov) {
        const size_t taken = std::min(sent, v.iov_len);
        v.iov_base = static_cast<char*>(v.iov_base) + taken;
        v.iov_len -= taken;
        sent -= taken;
      }
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
  mutable std::string local_ip_;  // Set by the first get_local_ip_and_port.
  mutable int local_port_ = 0;
  mutable bool local_known_ = false;
  bool body_chunked_ = false;
  // Time spent waiting for this request's body to arrive: what the body-rate bound counts. Kept
  // exact: waits of less than a millisecond, counted as whole ones rounded down, added nothing,
  // and a bound a millisecond away was then polled for 0 ms over and over.
  mutable Clock::duration client_wait_{};
  char trace_area_[32] = {};  // Empty unless tracing.
  char in_[kReadBufferBytes];
  size_t in_pos_ = 0, in_len_ = 0;
  std::string out_;
};

}  // namespace connection_internal

namespace {

using connection_internal::ConnectionStream;

thread_local ConnectionStream* t_stream = nullptr;

milliseconds ToMillis(time_t seconds, time_t micros) {
  return milliseconds(seconds * 1000 + micros / 1000);
}

}  // namespace

void MarkRequestHeadersRead() {
  if (t_stream != nullptr) t_stream->HeadersRead();
}

bool RequestBodyLeftUnread() { return t_stream != nullptr && t_stream->BodyLeftUnread(); }

struct PlainServer::Connection {
  // Who holds the connection. It passes between threads without mu_: a parked connection is in
  // the epoll set with EPOLLONESHOT, so its next event goes to one thread, which claims it;
  // Reap may take a parked one instead to close it as idle, and the thread that gets its event
  // then closes it.
  enum State : uint8_t {
    kClaimed,  // A thread is on it (serving it, or parking it).
    kParked,   // Waiting in the epoll set for its next request.
    kReaping,  // Taken by Reap while parked: shut down, to be closed by the thread its event wakes.
  };

  Connection(int socket, milliseconds read_timeout, milliseconds write_timeout,
             milliseconds header_timeout, size_t max_requests)
      : sock(socket),
        stream(socket, read_timeout, write_timeout, header_timeout),
        requests_left(max_requests) {}

  // Parked -> `next` (kClaimed by the thread its event woke, kReaping by Reap); false when the
  // other one took it first. Acquire: the parking thread's writes are seen by the taker.
  bool TakeParked(State next) {
    uint8_t parked = kParked;
    return state.compare_exchange_strong(parked, next, std::memory_order_acq_rel);
  }

  const int sock;
  ConnectionStream stream;
  size_t requests_left;  // Keep-alive's bound on requests per connection.
  std::atomic<uint8_t> state{kClaimed};
  // When a parked connection has been idle too long (steady clock, nanoseconds); read by Reap.
  std::atomic<int64_t> idle_until_ns{0};
};

// The connections one epoll_wait found ready, claimed by the thread that waited, which serves
// them in turn: at 8 busy connections a listener then wakes for several hits instead of one.
// What may hold the thread hands the ones not yet begun back (HandBackTheRest): their requests
// still wait unread in their sockets, so re-arming them wakes another listener at once.
// Belongs to its thread.
class PlainServer::Batch final : public connection_internal::BeforeHolding {
 public:
  static constexpr int kLimit = 8;  // Connections claimed from one wait at most.

  explicit Batch(PlainServer& server) : server_(server) {}
  ~Batch() { HandBackTheRest(); }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void Add(Connection& c) { members_[size_++] = &c; }
  bool empty() const { return next_ == size_; }
  // The next member not yet begun, or nullptr; the batch is then empty and takes new members.
  Connection* Next() {
    if (next_ == size_) {
      next_ = size_ = 0;
      return nullptr;
    }
    return members_[next_++];
  }
  void HandBackTheRest() override {
    while (next_ < size_) {
      server_.ParkOrClose(*members_[next_++], "the kernel refused to watch the connection");
    }
  }

 private:
  PlainServer& server_;
  Connection* members_[kLimit] = {};
  int next_ = 0, size_ = 0;
};

// The library's accept loop hands each socket to enqueue() and calls shutdown() once it stops
// accepting: parking a socket is quick, so it is done on the accept thread.
class PlainServer::Queue final : public httplib::TaskQueue {
 public:
  explicit Queue(PlainServer& server) : server_(server) { server_.StartThreads(); }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { server_.StopThreads(); }

 private:
  PlainServer& server_;
};

PlainServer::PlainServer(milliseconds header_timeout, size_t threads)
    : header_timeout_(header_timeout),
      threads_(std::max<size_t>(threads, 1)),
      max_pollers_(std::min(threads_, std::max<size_t>(2, std::thread::hardware_concurrency()))) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  new_task_queue = [this] { return new Queue(*this); };
}

PlainServer::~PlainServer() {
  StopThreads();
  if (epoll_ >= 0) ::close(epoll_);
}

void PlainServer::StartThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  // As the library writes it in each reply on a connection that stays open (its settings are
  // final once it listens).
  keep_alive_value_ = "timeout=" + std::to_string(keep_alive_timeout_sec_) +
                      ", max=" + std::to_string(keep_alive_max_count_);
  for (size_t i = 0; i < threads_; ++i) workers_.emplace_back([this] { Work(); });
  reaper_ = std::thread([this] { Reap(); });
}

void PlainServer::StopThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaper_.joinable()) return;  // Not started, or already stopped.
    stopping_ = true;
  }
  reap_cv_.notify_all();
  spare_cv_.notify_all();
  reaper_.join();  // Its last round shuts down every parked connection: clients see it at once.
  for (std::thread& t : workers_) t.join();  // Each finishes its request, then closes it.
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  while (!connections_.empty()) {
    auto it = connections_.begin();
    CloseLocked(*it->second, "the server stopped");
  }
}

bool PlainServer::process_and_close_socket(socket_t sock) {
  auto owned = std::make_unique<Connection>(sock, ToMillis(read_timeout_sec_, read_timeout_usec_),
                                            ToMillis(write_timeout_sec_, write_timeout_usec_),
                                            header_timeout_, keep_alive_max_count_);
  Connection& c = *owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      owned.reset();
      ::close(sock);
      return false;
    }
    // In the table before it is in the epoll set: its first event may come at once, and the
    // thread it wakes may close it (which erases it from the table).
    connections_.emplace(&c, std::move(owned));
  }
  if (Park(c, EPOLL_CTL_ADD)) return true;
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked(c, "the kernel refused to watch the connection");
  return false;
}

bool PlainServer::Park(Connection& c, int op) {
  const auto idle_until = Clock::now() + milliseconds(keep_alive_timeout_sec_ * 1000);
  c.idle_until_ns.store(idle_until.time_since_epoch().count(), std::memory_order_relaxed);
  // Parked before it is armed: once armed, another thread may claim it at any moment, and this
  // one must not touch it again. The arming call is what hands it over (ThreadSanitizer, whose
  // model of epoll orders only EPOLL_CTL_ADD before the waits, reports the claiming thread's
  // close as racing with this call's read of the descriptor; the kernel orders them).
  c.state.store(Connection::kParked, std::memory_order_release);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.ptr = &c;
  if (::epoll_ctl(epoll_, op, c.sock, &ev) == 0) return true;
  // Not armed: no event will come for it, so it is still this thread's (Reap may have marked it
  // meanwhile; it closes nothing itself).
  c.state.store(Connection::kClaimed, std::memory_order_relaxed);
  return false;
}

// Whether this thread may listen: one more listener while fewer than max_pollers_ do.
bool PlainServer::StartPolling() {
  size_t now = pollers_.load(std::memory_order_relaxed);
  while (now < max_pollers_) {
    if (pollers_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

void PlainServer::Work() {
  BecomePoolThread();
  Batch batch(*this);
  while (true) {
    if (!StartPolling()) {
      // Spare: wait until fewer threads than max_pollers_ listen (Reap wakes one when every
      // listener has been on a request for a while).
      std::unique_lock<std::mutex> lock(mu_);
      spare_cv_.wait(lock, [this] { return stopping_ || StartPolling(); });
      if (stopping_) return;
    }
    while (batch.empty()) {
      epoll_event events[Batch::kLimit];
      // The timeout only bounds how long a stop goes unnoticed by a listening thread.
      const int n =
          ::epoll_wait(epoll_, events, Batch::kLimit, static_cast<int>(kReapEvery.count()));
      if (stopping_.load(std::memory_order_acquire)) {
        // Connections left parked, those whose events this wait took among them, are closed
        // by StopThreads once every thread has stopped.
        pollers_.fetch_sub(1, std::memory_order_relaxed);
        return;
      }
      for (int i = 0; i < n; ++i) {
        // The event is this connection's one event since it was armed: no other thread has it.
        auto* c = static_cast<Connection*>(events[i].data.ptr);
        if (c->TakeParked(Connection::kClaimed)) {
          batch.Add(*c);
        } else {
          std::lock_guard<std::mutex> lock(mu_);
          CloseLocked(*c, "idle past the keep-alive timeout: closing");
        }
      }
    }
    // The last listener: if it stays on this request, Reap wakes a spare.
    if (pollers_.fetch_sub(1, std::memory_order_relaxed) == 1) {
      all_busy_since_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    while (Connection* c = batch.Next()) Serve(*c, batch);
  }
}

void PlainServer::ParkOrClose(Connection& c, const char* why) {
  if (Park(c, EPOLL_CTL_MOD)) return;
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked(c, why);
}

void PlainServer::Serve(Connection& c, Batch& rest) {
  bool keep = true;
  do {
    if (c.requests_left == 0) {
      keep = false;
      break;
    }
    --c.requests_left;
    keep = ServeOne(c, c.requests_left == 0, rest);
  } while (keep && c.stream.HasBuffered() && !stopping_.load(std::memory_order_relaxed));
  // Re-armed without mu_: the threads on other connections never wait for this one.
  if (keep && !stopping_.load(std::memory_order_relaxed) && Park(c, EPOLL_CTL_MOD)) return;
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked(c, "closing after the request");
}

bool PlainServer::ServeOne(Connection& c, bool last, Batch& rest) {
  ConnectionStream& stream = c.stream;
  t_stream = &stream;
  stream.StartRequest();
  if (quick_ != nullptr) {
    const ConnectionStream::Quick quick = stream.TryQuick(*quick_, keep_alive_value_, last, rest);
    if (quick != ConnectionStream::Quick::kNo) {
      const bool sent = quick != ConnectionStream::Quick::kFailed;
      const bool closed = quick == ConnectionStream::Quick::kAnsweredAndClose;
      stream.TraceRequestEnd(sent, closed);
      ReportCutShort(stream);
      t_stream = nullptr;
      return sent && !closed;
    }
  }
  // The library's requests may wait for their client, or take long (an upload, a compile).
  rest.HandBackTheRest();
  bool closed = false;
  bool ok =
      process_request(stream, /*close_connection=*/last, closed, [&stream](httplib::Request& req) {
        const bool chunked = req.has_header("Transfer-Encoding");
        const uint64_t length =
            std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
        stream.BodyAnnounced(length, chunked);
      });
  if (!stream.Flush()) ok = false;
  stream.TraceRequestEnd(ok, closed);
  ReportCutShort(stream);
  t_stream = nullptr;
  if (ok && stream.BodyLeftUnread()) {
    stream.Linger(kLinger);
    return false;
  }
  return ok && !closed;
}

void PlainServer::ReportCutShort(const ConnectionStream& stream) const {
  if (stream.failure().empty() || !cut_short_) return;
  std::string ip;
  int port = 0;
  stream.get_remote_ip_and_port(ip, port);
  cut_short_(ip + ":" + std::to_string(port), stream.failure());
}

void PlainServer::Reap() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next_reap = Clock::now();
  while (true) {
    const bool stop = stopping_;
    const auto now = Clock::now();
    // Every listener has been on a request for a whole round: they may be blocked (an upload,
    // a compile, a read through to an origin), so a spare listens meanwhile. Requests that
    // end within a round (hits) never wake one.
    if (pollers_.load(std::memory_order_relaxed) == 0 &&
        now.time_since_epoch().count() - all_busy_since_ns_.load(std::memory_order_relaxed) >=
            std::chrono::duration_cast<Clock::duration>(kSpareAfter).count()) {
      spare_cv_.notify_one();
    }
    if (stop || now >= next_reap) {
      // Idle ones are shut down, not closed: the descriptor stays theirs (no new connection can
      // be given its number while a thread may still re-arm it), the client sees the close at
      // once, and the event the shutdown raises wakes a thread that closes it. On a stop, the
      // connections left are closed once the threads have stopped.
      for (auto& [conn, owned] : connections_) {
        if (conn->state.load(std::memory_order_relaxed) != Connection::kParked) continue;
        if (!stop &&
            now.time_since_epoch().count() < conn->idle_until_ns.load(std::memory_order_relaxed)) {
          continue;
        }
        if (conn->TakeParked(Connection::kReaping)) {
          conn->stream.TraceClose(stop ? "the server is stopping: shutting down an idle connection"
                                       : "idle past the keep-alive timeout: shutting down");
          ::shutdown(conn->sock, SHUT_RDWR);
        }
      }
      next_reap = now + kReapEvery;
    }
    if (stop) return;
    // Rounds of kSpareAfter only while every listener is on a request, of kWatchEvery while
    // some is: an idle server wakes this thread ten times a second, a busy one fifty.
    const size_t pollers = pollers_.load(std::memory_order_relaxed);
    reap_cv_.wait_for(lock, pollers == 0             ? kSpareAfter
                            : pollers < max_pollers_ ? kWatchEvery
                                                     : kReapEvery);
  }
}

void PlainServer::CloseLocked(Connection& c, const char* why) {
  c.stream.TraceClose(why);
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.sock, nullptr);
  ::shutdown(c.sock, SHUT_RDWR);
  ::close(c.sock);
  connections_.erase(&c);  // Destroys c.
}

}  // namespace hlocache::server
