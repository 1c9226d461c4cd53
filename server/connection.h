// How the plain-HTTP server runs a connection: cpp-httplib's request parsing and routing, over
// a socket stream of our own (instead of the library's) that
//   - sends a reply's status line, headers and body in one send() when they fit in 64 KiB (the
//     library writes headers and body separately, which with TCP_NODELAY on is two segments
//     and two wake-ups of the client for every small hit);
//   - reads without a poll() before each recv() while bytes are buffered, and polls only when
//     it has to wait;
//   - bounds the time a request's line and headers may take as a whole (--io-timeout), so a
//     client trickling a byte at a time cannot hold a thread; the per-read timeout still bounds
//     each wait on a body;
//   - notices between requests, within 100 ms, that the server is stopping, so an idle
//     keep-alive connection does not hold up a drain.
// The TLS server keeps the library's own streams.
//
// Thread safety: each connection is served by one thread from start to end; the thread-local
// state below belongs to the connection on the calling thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>

namespace hlocache::server {

// Called by the pre-routing handler once a request's line and headers have been read: from
// here on only the per-read timeout applies (bodies may be large and slow).
void MarkRequestHeadersRead();

// Whether the request being answered on this thread announced a body that has not all been
// read (a refused upload). Such a connection is closed after the reply, and the reply should
// say so (Connection: close), or a client would send its next request into a closed socket.
bool RequestBodyLeftUnread();

// cpp-httplib listens with a backlog of 5: a fleet connecting at once overflows it, and the
// kernel drops the SYNs beyond it, which clients see as connect timeouts (a retransmitted SYN
// waits a second). The listening socket is reachable from a subclass; listen() again widens it.
template <typename Base>
class WideBacklog : public Base {
 public:
  using Base::Base;
  void WidenBacklog() { ::listen(this->svr_sock_, kListenBacklog); }
  static constexpr int kListenBacklog = 4096;  // The kernel caps it at net.core.somaxconn.
};

class PlainServer final : public WideBacklog<httplib::Server> {
 public:
  // `header_timeout`: the longest a request's line and headers may take to arrive.
  explicit PlainServer(std::chrono::milliseconds header_timeout)
      : header_timeout_(header_timeout) {}

  // Called, on the connection's thread, for each request the connection failed during: a
  // deadline passed, the client went away mid-request, or a send failed. `remote` is
  // "ip:port"; `why` a phrase such as "its body arrived slower than 500 bytes/s (1200 bytes
  // read)". Such a request may have no access-log line (the reply never went out). Set before
  // listening.
  using CutShortHandler = std::function<void(const std::string& remote, const std::string& why)>;
  void set_cut_short_handler(CutShortHandler handler) { cut_short_ = std::move(handler); }

 private:
  bool process_and_close_socket(socket_t sock) override;

  const std::chrono::milliseconds header_timeout_;
  CutShortHandler cut_short_;
};

}  // namespace hlocache::server
