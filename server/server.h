// The artifact server: `hlocache serve`. The HTTP API is specified in schema/http-api.yaml and
// summarized in the README.
//
// A Server owns its store directory for as long as it runs (the store's lock, and
// DIR/server.json with its URL and pid, so that clients and other tools find it). Requests are
// handled by a fixed pool of threads; each connection has read and write timeouts, and request
// bodies are bounded. Uploads become visible only after they are verified (key well formed,
// container complete, checksum right, header key equal to the URL's), so an aborted or bad
// upload leaves nothing behind. Compiles run in the compiler worker pool, one per key at a time
// across all clients.
//
// Thread safety: Shutdown may be called from any thread, any number of times; Wait from one.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "common/status.h"

namespace hlocache::server {

struct ServerOptions {
  std::filesystem::path dir = "var/hlocache";
  std::string host = "127.0.0.1";
  int port = 7070;  // 0: any free port (see Server::port()).
  bool read_only = false;
  uint64_t max_size = 0;  // The store's size cap in bytes; 0 for none.
  // Bearer tokens and their roles (server/auth.h). Without a tokens file every request has the
  // admin role, so the server refuses to listen beyond loopback unless insecure_open is set.
  std::filesystem::path tokens_file;
  bool insecure_open = false;
  std::filesystem::path tls_cert, tls_key;  // Both or neither: HTTPS.
  size_t compile_workers = 2;
  size_t compile_queue = 64;
  std::chrono::seconds compile_timeout{600};
  uint64_t max_body = uint64_t{4} << 30;  // Largest upload or HLO text accepted (413 beyond).
  // The memory tier's budget (server/memory_tier.h): bodies of recent hits from 64 KiB to a
  // quarter of it. 0 turns it off.
  uint64_t memory_tier_bytes = uint64_t{256} << 20;
  // Send the memory tier's bodies from its files' pages (splice, as nginx's `sendfile on`)
  // rather than copying them into the socket. Off by default: over loopback the copy served
  // 1.4x to 1.8x the hits a second at 8 connections (1 MiB and 16 MiB) and at 64 (16 MiB);
  // at 64 connections and 1 MiB the splice was level to 22% ahead (bench/README). The pages
  // save the copy where a network card reads them itself.
  bool zero_copy = false;
  size_t threads = 64;                  // Requests served at once (idle connections need none).
  std::chrono::seconds io_timeout{10};  // Longest wait for a client to send or receive.
  std::chrono::seconds keep_alive_timeout{5};
  // Also decode the header of every upload and check its payload kind against its target.
  bool verify_uploads = false;
  std::string access_log = "-";  // "-" for stderr, "" for none, or a file to append to.
  bool access_log_json = false;
  std::filesystem::path worker_binary;  // The `hlocache` executable that runs compile-worker.
  std::string cxx = "c++";
  // The origins and bucket this server reads through to (server/upstream.h: a comma-separated
  // list); empty for none.
  std::string upstream_url;
  std::string upstream_token;    // Its bearer token.
  std::string upstream_ca_cert;  // The CA of an https origin; empty for the system's.
  bool sync_puts = true;         // Off only for benchmarks.
};

// The checks Server::Start makes on the options alone, before it touches a file or a socket:
// kInvalidArgument with the reason. (Start also reads the tokens and TLS files, opens the store
// and binds the address, which can fail on their own.)
Status CheckServerOptions(const ServerOptions& options);

class Server {
 public:
  // Opens the store, binds the address and starts serving in background threads. Errors: the
  // store's (kUnavailable when another process owns DIR), kInvalidArgument for bad options
  // (a non-loopback address without tokens, unreadable TLS files), kUnavailable when the
  // address cannot be bound. Sets SIGPIPE to be ignored in this process: with zero_copy replies
  // go out with splice() or sendfile(), which cannot ask for MSG_NOSIGNAL, and a client gone
  // mid-reply must not end it.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);
  virtual ~Server() = default;

  // "http://127.0.0.1:7070" (or https).
  virtual std::string url() const = 0;
  virtual int port() const = 0;
  // Stops accepting connections, lets the requests in flight finish, then closes the store
  // and removes server.json. Returns once all of that is done.
  virtual void Shutdown() = 0;
};

}  // namespace hlocache::server
