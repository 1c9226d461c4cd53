// Where artifacts are kept: a local store, an hlocache server, and (later) an object store's
// bucket, all behind one small interface, as ccache's storage backends are. Every call may fail;
// a failure is a reason for the caller to go on without the backend (and, for kUnavailable, to
// let it rest: storage/availability.h), never to fail the user's request.
//
// A backend hands over bytes as it holds them: callers verify what they read (the container's
// checksums, client/cache.cc and server/verified_put.h), so a backend never needs to trust the
// one behind it.
//
// Errors, by code: kUnavailable when the backend cannot be reached or failed in a way worth
// trying again later (a refused connection, a timeout, a 5xx); kPermissionDenied when it refused
// the caller (401, 403, a read-only store or server); kInvalidArgument when it refused the
// request itself (another 4xx: a malformed key, an artifact that fails the server's checks, a
// malformed module sent to Compile); kFailedPrecondition from Compile for a module the backend
// does not compile (422, or a backend that compiles nothing). Other codes come from a local
// store (kIoError, kDataLoss, kResourceExhausted for a full disk).
//
// Ownership: whoever makes a backend owns it. Thread safety: every method may be called from
// any thread at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "common/status.h"

namespace hlocache::storage {

// Receives an artifact as it arrives: `start` once with its size (false declines the body,
// and the read stops), then `chunk` with the bytes in order (false stops the read).
struct ReadSink {
  std::function<bool(uint64_t size)> start;
  std::function<bool(std::string_view bytes)> chunk;
};

// The next piece of an artifact being written: empty when it is all written; an error aborts
// the write.
using ChunkSource = std::function<Result<std::string_view>()>;

struct RemoteCompile {
  std::string artifact;
  std::string cache_status;  // The server's X-Hlocache-Cache: "hit", "miss" or "coalesced".
  std::string key;           // The key the server computed for the module (X-Hlocache-Key).
};

// What a backend that keeps request counters (a bucket) has sent and received since it was
// made. `kept` is false for backends that keep none.
struct RequestStats {
  bool kept = false;
  uint64_t requests = 0;        // Requests sent, each retry counted.
  uint64_t retries = 0;         // Requests sent again after no answer or a 5xx.
  uint64_t bytes_sent = 0;      // Request bodies.
  uint64_t bytes_received = 0;  // Answer bodies.
  uint64_t latency_micros = 0;  // Summed from send to the whole answer.
  // Calls that failed, by kind: no answer or a 5xx after every try; 503 SlowDown answers (each
  // one, retried or not); 401/403; other 4xx (not 404).
  uint64_t errors_unavailable = 0, throttled = 0, errors_denied = 0, errors_refused = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "local DIR", "http://host:port": for messages and for telling backends apart.
  virtual const std::string& name() const = 0;
  // Whether it lives on another machine (reached over the network).
  virtual bool remote() const = 0;

  // Whether `key` is held, and its size in bytes; nullopt when it is not.
  virtual Result<std::optional<uint64_t>> Head(std::string_view key) = 0;

  // Streams `key` into `sink`. False when it is not held (sink.start is not called); true when
  // the whole body was handed over, and also when the sink stopped the read (its owner knows
  // why). A read that breaks off midway is an error (kUnavailable over the network).
  virtual Result<bool> Read(std::string_view key, const ReadSink& sink) = 0;

  // Writes `size` bytes, taken from `next`, under `key`. Nothing is visible under the key
  // until the whole artifact is there.
  virtual Status Write(std::string_view key, uint64_t size, const ChunkSource& next,
                       const cache::ArtifactInfo& info) = 0;

  // Whether the backend compiles modules for `target` (an hlocache server does; a store and a
  // bucket do not).
  virtual bool CanCompile(std::string_view target) const = 0;
  // Asks the backend to compile (or find) the module. Only when CanCompile; else
  // kFailedPrecondition.
  virtual Result<RemoteCompile> Compile(std::string_view hlo_text, std::string_view target) = 0;

  // Its request counters; `kept` false (the default) when it keeps none.
  virtual RequestStats request_stats() const { return {}; }

  // Tells the backend `key` was just used (served from whichever tier held it). A bucket
  // records it for `hlocache gc` (storage/s3_backend.h); others ignore it. Never blocks on the
  // network, never fails.
  virtual void NoteUse(std::string_view /*key*/) {}

  // The whole artifact as the backend holds it, or nullopt (Read into one string).
  Result<std::optional<std::string>> Get(std::string_view key);
  // Writes `bytes` whole (Write from one piece).
  Status Put(std::string_view key, std::string_view bytes, const cache::ArtifactInfo& info);
};

}  // namespace hlocache::storage
