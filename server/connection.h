// How the plain-HTTP server runs a connection: cpp-httplib's request parsing and routing, over
// a socket stream of our own (instead of the library's) that
//   - sends a reply's status line, headers and body in one send() when they fit in 64 KiB (the
//     library writes headers and body separately, which with TCP_NODELAY on is two segments
//     and two wake-ups of the client for every small hit);
//   - sends bytes that are also a sealed file's (FileBackedBytes, below; --zero-copy) from the
//     file, with splice() through a pipe of the thread's (sendfile() where the system gives
//     no pipe);
//   - reads without a poll() before each recv() while bytes are buffered, and polls only when
//     it has to wait;
//   - bounds the time a request's line and headers may take as a whole (--io-timeout), so a
//     client trickling a byte at a time cannot hold a thread; the per-read timeout still bounds
//     each wait on a body.
//
// Connections and threads: a connection holds a thread only while a request on it is being read and
// answered. Between requests it is parked in one epoll set, and a few threads of the pool (one per
// core, at least 2; named hlocache-pool) listen on it, each claiming the connections one wait finds
// ready (up to 8; EPOLLONESHOT gives each to one thread) and serving them in turn; the others are
// spares. A batch is for hits: before anything that may hold its thread (a request the quick path
// declines, a reply over 64 KiB, a send that would wait for the client) the thread hands the
// members it has not begun back to the epoll set, where their requests still wait unread and so
// wake another listener at once. Idle keep-alive connections cost no thread, and under many busy
// connections a few threads run requests back to back, finding the next ready connection without
// sleeping, instead of a thread per connection sleeping and waking for each of its requests.
// Measured on 2 cores shared with wrk: 1.1 context switches a request at 64 connections with a
// thread per connection, 0.1 with 4 listeners; with 4 listeners taking one connection a wake, 8
// busy connections woke a listener for nearly every hit, and the wake-ups made the tail of a 4 KiB
// hit (p99 1.6 to 1.9 ms); batches brought it to 1.0 to 1.3 ms, and 2 listeners, one a core as
// nginx runs a worker a core, to 0.4 to 0.6 ms (bench/README). When every listener has been on a
// request for 2 ms (it may be blocked: an upload, a compile, a read through to an origin), a spare
// starts listening (noticed within 20 ms: the reaper looks that often under load), so a request
// waits long only when every thread of the pool is busy; hits end sooner and never wake one (a
// spare woken each time the listeners were all busy cost a context switch per request at 8
// connections). A connection passes from thread to thread through its one-shot epoll event, without
// a lock: the thread the event wakes claims it, serves it and re-arms it (a table lock around the
// claim and the re-arm was three futex calls a request at 8 connections). A connection idle past
// the keep-alive timeout, or idle when the server stops, is shut down at once (the client sees the
// close), and closed by the thread its last event wakes.
// A hit, the request the server answers most, need not go through the library at all: when the
// head of the next request is all buffered and is a QuickRequest (below), the connection offers
// it to a QuickAnswerer first, which answers it with the reply the library would have made
// (the library's request parsing, regex routing and header maps were a third of the server's
// time on a 4 KiB hit). Anything the answerer declines goes to the library with every byte
// still buffered.
// The TLS server keeps the library's own streams and its thread per connection.
//
// Thread safety: a request is served by one thread from start to end; the thread-local state
// below belongs to the request on the calling thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace hlocache::server {

// Called by the pre-routing handler once a request's line and headers have been read: from
// here on only the per-read timeout applies (bodies may be large and slow).
void MarkRequestHeadersRead();

// Whether the request being answered on this thread announced a body that has not all been
// read (a refused upload). Such a connection is closed after the reply, and the reply should
// say so (Connection: close), or a client would send its next request into a closed socket.
bool RequestBodyLeftUnread();

// Bytes in memory that are also the contents of a file, from offset 0. While one is alive on a
// thread, a plain connection's stream that is asked to send bytes lying within it sends them
// from the file (splice): the kernel hands the file's pages to the socket, without
// copying them through this process (as nginx sends static files). The file's contents must not
// change while they may be in flight: a sealed memory file (server/memory_tier.h). A TLS
// connection sends the bytes from memory. Scoped to the enclosing block; not copyable.
class FileBackedBytes {
 public:
  FileBackedBytes(std::span<const char> bytes, int fd);
  ~FileBackedBytes();
  FileBackedBytes(const FileBackedBytes&) = delete;
  FileBackedBytes& operator=(const FileBackedBytes&) = delete;

  // The file offset of `data` when [data, data + size) lies within the innermost one alive on
  // this thread (its descriptor in `fd`); -1 otherwise.
  static int64_t OffsetOf(const char* data, size_t size, int& fd);

 private:
  std::span<const char> bytes_;
  int fd_;
  FileBackedBytes* outer_;
};

// A request the plain server may answer without the library: a GET or HEAD whose line and
// headers have all arrived, over HTTP/1.1, with a path of plain characters ([A-Za-z0-9/._-]) and
// no header but Host, User-Agent, Accept, Accept-Encoding, Authorization, X-Hlocache-Namespace
// and `Connection: close` (each at most once; server/quick_request.h). Whatever else a request
// holds may change the reply the library would make (a range, a condition, a body), and such a
// request goes to the library. The views point into the connection's buffer: valid during the call
// only.
struct QuickRequest {
  bool head_only = false;  // HEAD: the reply's head alone is sent.
  std::string_view path;
  std::string_view authorization;  // Empty when the request has none.
  // The request has an Accept-Encoding field: the library compresses a text reply to it (an
  // octet-stream one never).
  bool accept_encoding = false;
  std::string_view file_namespace;  // X-Hlocache-Namespace; empty when absent.
  std::string_view remote_ip;
  // The value of the Keep-Alive header the library puts in a reply on a connection that stays
  // open; empty when the connection closes after this request (`Connection: close`, or the
  // last request it may carry), and the reply then says `Connection: close`.
  std::string_view keep_alive;
};

// A reply to a QuickRequest: `head` (the status line and the headers, through the empty line
// that ends them), then `body` (not sent for a HEAD, whose reply may still hold the body the
// library would have counted: the error text of a 404). When `body_fd` is not -1 the body is also
// that file's contents from `body_offset`, and a large one is sent from it (splice). `owner`
// keeps the body's memory alive until it is sent.
struct QuickReply {
  int status = 200;  // As in `head`.
  std::string head;
  std::span<const char> body;
  int body_fd = -1;
  int64_t body_offset = 0;
  std::shared_ptr<const void> owner;
};

// Answers the requests it can on the hot path, with none of the library's parsing, routing and
// header maps (a third of the server's time on a small hit): see PlainServer::set_quick_answerer.
// Called on the connection's thread, concurrently for different connections.
class QuickAnswerer {
 public:
  virtual ~QuickAnswerer() = default;
  // Fills `reply` and returns true when it answers `request`; returns false to leave it to the
  // library, having done nothing the library's answer would not do as well (a lookup it repeats,
  // but nothing counted or sent). The reply must be the bytes the library would have sent for
  // the same request.
  virtual bool Answer(const QuickRequest& request, QuickReply& reply) = 0;
  // After a reply from Answer went out (`sent`) or failed to.
  virtual void Done(const QuickRequest& request, const QuickReply& reply, bool sent) = 0;
};

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

namespace connection_internal {
class ConnectionStream;  // A plain connection's httplib::Stream (connection.cc).
}  // namespace connection_internal

class PlainServer final : public WideBacklog<httplib::Server> {
 public:
  // `header_timeout`: the longest a request's line and headers may take to arrive.
  // `threads`: requests served at once (connections between requests need none).
  PlainServer(std::chrono::milliseconds header_timeout, size_t threads);
  ~PlainServer() override;

  // False when the kernel refused the epoll set (out of file descriptors or memory).
  bool is_valid() const override { return epoll_ >= 0; }

  // Called, on the connection's thread, for each request the connection failed during: a
  // deadline passed, the client went away mid-request, or a send failed. `remote` is
  // "ip:port"; `why` a phrase such as "its body arrived slower than 500 bytes/s (1200 bytes
  // read)". Such a request may have no access-log line (the reply never went out). Set before
  // listening.
  using CutShortHandler = std::function<void(const std::string& remote, const std::string& why)>;
  void set_cut_short_handler(CutShortHandler handler) { cut_short_ = std::move(handler); }

  // Offered each request that is a QuickRequest before the library reads it. Set before
  // listening; not owned; must outlive the server's threads.
  void set_quick_answerer(QuickAnswerer* answerer) { quick_ = answerer; }

 private:
  struct Connection;  // A socket, its stream and where it stands (connection.cc).
  class Queue;        // What the library hands accepted sockets to: parks them here.
  class Batch;        // The connections one wait found ready, claimed by one thread.

  // Parks a newly accepted socket (the library calls it, through Queue, on its accept thread).
  bool process_and_close_socket(socket_t sock) override;

  void StartThreads();
  // Closes idle connections, lets the requests in flight finish, joins the threads.
  void StopThreads();
  void Work();  // A pool thread: the ready connections of each wait, in turn.
  // Shuts down connections idle past the keep-alive timeout (all idle ones on stop), for the
  // threads their events wake to close, and wakes a spare when every listener has been on a
  // request for 2 ms.
  void Reap();
  // Serves requests on `c` (claimed by this thread) while it has them; then parks or closes it.
  // `rest`: the members of its batch not yet begun, handed back before anything that may take
  // long.
  void Serve(Connection& c, Batch& rest);
  // Serves one request; false when the connection must close after it.
  bool ServeOne(Connection& c, bool last, Batch& rest);
  // Parks a connection this thread holds, served (EPOLL_CTL_MOD), or closes it when the kernel
  // refuses.
  void ParkOrClose(Connection& c, const char* why);
  // Tells cut_short_ about the request that just ended on `stream`, if it failed.
  void ReportCutShort(const connection_internal::ConnectionStream& stream) const;
  // Parks `c`, which this thread holds, in the epoll set (new: EPOLL_CTL_ADD; served:
  // EPOLL_CTL_MOD) until its next request or its keep-alive timeout, and lets go of it; false
  // when the kernel refused, and then the thread still holds it.
  bool Park(Connection& c, int op);
  // Whether the calling thread may listen (fewer than max_pollers_ do); counts it in if so.
  bool StartPolling();
  // Closes a connection this thread holds (or any, once the threads have stopped), mu_ held;
  // `why` is traced.
  void CloseLocked(Connection& c, const char* why);

  const std::chrono::milliseconds header_timeout_;
  const size_t threads_;
  const size_t max_pollers_;  // Threads listening for ready connections at most.
  CutShortHandler cut_short_;
  QuickAnswerer* quick_ = nullptr;
  std::string keep_alive_value_;  // QuickRequest::keep_alive; set when the threads start.

  int epoll_ = -1;  // Lives as long as the server.
  std::atomic<bool> stopping_{false};
  // Guards connections_ (which a request never needs: it runs on a connection its thread
  // claimed from an epoll event, see Connection::state), closing, and the spares' waiting.
  std::mutex mu_;
  std::condition_variable reap_cv_;
  std::condition_variable spare_cv_;           // Spares wait here for pollers_ < max_pollers_.
  std::atomic<size_t> pollers_{0};             // Threads listening for ready connections.
  std::atomic<int64_t> all_busy_since_ns_{0};  // When pollers_ last fell to 0 (steady clock).
  // Every open connection, owned here; its address is its name in its epoll events.
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<std::thread> workers_;
  std::thread reaper_;
};

}  // namespace hlocache::server
