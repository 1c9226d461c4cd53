// GET, HEAD, PUT and DELETE of /v1/artifacts/{key}.
#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>

#include "cache/key.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "server/connection.h"
#include "server/context.h"
#include "server/memory_tier.h"
#include "server/upstream.h"
#include "server/verified_put.h"

namespace hlocache::server {
namespace {

constexpr const char* kArtifactPath = R"(/v1/artifacts/([^/]*))";
constexpr const char* kOctetStream = "application/octet-stream";
// Replies up to this size are copied into the response; larger ones are sent from the
// store's buffer.
constexpr size_t kCopiedReplyBytes = 64 << 10;

// A miss on a file artifact, counted for the namespace the client names (a mount names its own;
// nothing else tells which namespace a key that is not there belongs to).
void CountFileMiss(ServerContext& ctx, std::string_view file_namespace) {
  if (!file_namespace.empty() && cache::ValidateFileNamespace(file_namespace).ok()) {
    ctx.metrics.CountFile(file_namespace, FileOutcome::kMiss);
  }
}
void CountFileMiss(ServerContext& ctx, const httplib::Request& req) {
  CountFileMiss(ctx, req.get_header_value("X-Hlocache-Namespace"));
}

// The key from the path, or an error answered with 400.
std::optional<std::string> KeyOf(const httplib::Request& req, httplib::Response& res) {
  std::string key = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (!cache::IsWellFormedKey(key)) {
    SendError(res, 400, "malformed key: a key is 'v1-' and 32 lowercase hex digits");
    return std::nullopt;
  }
  return key;
}

void HandleHead(ServerContext& ctx, const std::string& key, const httplib::Request& req,
                httplib::Response& res) {
  auto info = ctx.store->Info(key);
  if (!info) return SendError(res, HttpStatusOf(info.error()), info.error().message());
  if (!*info && ctx.upstream) {
    // Asked, not fetched: the origin's answer is this server's, and a HEAD moves no bytes.
    auto upstream_size = ctx.upstream->Head(key);
    if (upstream_size && *upstream_size) {
      res.set_header("X-Hlocache-Source", "upstream");
      res.set_content_provider(**upstream_size, kOctetStream,
                               [](size_t, size_t, httplib::DataSink&) { return false; });
      return;
    }
  }
  if (!*info) {
    CountFileMiss(ctx, req);
    return SendError(res, 404, "no artifact " + key);
  }
  res.set_header("X-Hlocache-Checksum", (*info)->checksum.Hex());
  // HEAD never calls the provider; it only carries the length.
  res.set_content_provider((*info)->size, kOctetStream,
                           [](size_t, size_t, httplib::DataSink&) { return false; });
}

// Counts a hit on an artifact whose first bytes are `head` (its header says what it is).
void CountHit(ServerContext& ctx, std::string_view key, std::span<const char> head,
              bool from_upstream) {
  const std::string_view header(head.data(), head.size());
  if (const std::string file_namespace = compiler::PeekFileNamespace(header);
      !file_namespace.empty()) {
    ctx.metrics.CountFile(file_namespace, FileOutcome::kHit);
  }
  // A fetched artifact was a miss here (the upstream's counters say where it came from).
  (from_upstream ? ctx.metrics.misses : ctx.metrics.hits).fetch_add(1, std::memory_order_relaxed);
  if (ctx.upstream) ctx.upstream->NoteUse(key);  // For gc of a bucket behind this server.
  const double saved = compiler::PeekCompileSeconds(header);
  ctx.metrics.compile_saved_micros.fetch_add(static_cast<uint64_t>(saved * 1e6),
                                             std::memory_order_relaxed);
}

// The file a memory-tier body is sent from: its memory file with --zero-copy; -1 without, for a
// copy from its memory (ServerOptions::zero_copy says why that is the default).
int FileToSendFrom(const ServerContext& ctx, const MemoryBody& body) {
  return ctx.options.zero_copy ? body.fd() : -1;
}

// Sends a body from the memory tier: from FileToSendFrom's file when there is one
// (FileBackedBytes tells the connection which file holds the bytes), else from its memory.
void SendMemoryBody(ServerContext& ctx, std::shared_ptr<const MemoryBody> body,
                    httplib::Response& res) {
  res.set_header("X-Hlocache-Checksum", body->checksum().Hex());
  Metrics* metrics = &ctx.metrics;
  const size_t size = body->bytes().size();
  const int file = FileToSendFrom(ctx, *body);
  auto provide = [body = std::move(body), metrics, file](size_t offset, size_t length,
                                                         httplib::DataSink& sink) {
    const std::span<const char> bytes = body->bytes();
    if (offset > bytes.size() || length > bytes.size() - offset) return false;
    std::optional<FileBackedBytes> file_backed;
    if (file >= 0) file_backed.emplace(bytes, file);
    if (!sink.write(bytes.data() + offset, length)) return false;
    metrics->bytes_out.fetch_add(length, std::memory_order_relaxed);
    return true;
  };
  res.set_content_provider(size, kOctetStream, std::move(provide));
}

// The memory body of `key` when it is still the store's entry (the check records the access, as
// a read from the store would); null when the caller must read the store.
std::shared_ptr<const MemoryBody> FindInMemory(ServerContext& ctx, std::string_view key) {
  std::shared_ptr<const MemoryBody> body = ctx.memory_tier->Find(key);
  if (!body) return nullptr;
  auto checksum = ctx.store->Touch(key);
  if (!checksum) return nullptr;  // The store failed: let the read say how.
  if (!*checksum || **checksum != body->checksum()) {
    // Erased, evicted, quarantined or replaced since it was kept: never served from here again.
    ctx.memory_tier->Erase(key, body.get());
    return nullptr;
  }
  return body;
}

// A hit on a body the memory tier holds, if the store still has that entry (the check records
// the access, as a read from the store would). False when the caller must read the store.
bool ServeFromMemory(ServerContext& ctx, const std::string& key, httplib::Response& res) {
  std::shared_ptr<const MemoryBody> body = FindInMemory(ctx, key);
  if (!body) return false;
  CountHit(ctx, key, body->bytes(), /*from_upstream=*/false);
  ctx.metrics.memory_hits.fetch_add(1, std::memory_order_relaxed);
  SendMemoryBody(ctx, std::move(body), res);
  return true;
}

// Copies a verified single-chunk artifact into the memory tier; null when it is not kept.
std::shared_ptr<const MemoryBody> KeepInMemory(ServerContext& ctx, const cache::EntryInfo& info,
                                               std::span<const char> bytes) {
  auto filler = ctx.memory_tier->StartFilling(info.key, info.size, info.checksum);
  if (!filler || !filler->Append(bytes).ok()) return nullptr;
  auto sealed = filler->Seal();
  if (!sealed) return nullptr;
  ctx.memory_tier->Insert(*sealed);
  return *sealed;
}

// A hit streamed from the store, chunk by chunk: where it stands (the verified chunk in hand and
// its offset in the artifact), and the memory tier's copy being made as it streams (none for a
// range, which may skip chunks).
class StoreStream {
 public:
  StoreStream(ServerContext& ctx, std::shared_ptr<cache::ArtifactReader> reader,
              std::span<const char> first, std::unique_ptr<MemoryBodyFiller> filler)
      : ctx_(ctx), reader_(std::move(reader)), chunk_(first), filler_(std::move(filler)) {}

  // cpp-httplib's content provider: sends bytes from `offset`, at most `length` of them.
  bool Provide(size_t offset, size_t length, httplib::DataSink& sink) {
    // Chunks wholly before `offset` (a range's start) are read, each verified, and skipped.
    // Ranges asked out of order end the reply.
    if (offset < chunk_start_) return false;
    while (offset - chunk_start_ >= chunk_.size()) {
      auto next = reader_->Next();
      // A chunk that fails its check mid-stream ends the connection short of the length the
      // client was promised, so the client can tell, and nothing bad is handed on.
      if (!next || next->empty()) return false;
      chunk_start_ += chunk_.size();
      chunk_ = *next;
      if (filler_ && !filler_->Append(chunk_).ok()) filler_ = nullptr;
    }
    const size_t skip = offset - chunk_start_;
    const std::span<const char> piece =
        chunk_.subspan(skip, std::min(length, chunk_.size() - skip));
    if (!sink.write(piece.data(), piece.size())) return false;
    ctx_.metrics.bytes_out.fetch_add(piece.size(), std::memory_order_relaxed);
    if (filler_ && offset + piece.size() == reader_->info().size) {
      // The last chunk is out: the reader's end checks the whole artifact's checksum, and only
      // then is the copy kept.
      auto end = reader_->Next();
      if (end && end->empty()) {
        if (auto sealed = filler_->Seal()) ctx_.memory_tier->Insert(*sealed);
      }
      filler_ = nullptr;
    }
    return true;
  }

 private:
  ServerContext& ctx_;
  const std::shared_ptr<cache::ArtifactReader> reader_;
  std::span<const char> chunk_;
  uint64_t chunk_start_ = 0;
  std::unique_ptr<MemoryBodyFiller> filler_;
};

void HandleGet(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto key = KeyOf(req, res);
  if (!key) return;
  if (req.method == "HEAD") return HandleHead(ctx, *key, req, res);
  if (ctx.memory_tier && ServeFromMemory(ctx, *key, res)) return;
  auto opened = ctx.store->OpenReader(*key);
  if (!opened) {
    ctx.metrics.store_errors.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, HttpStatusOf(opened.error()), opened.error().message());
  }
  std::shared_ptr<cache::ArtifactReader> reader(std::move(*opened));
  bool from_upstream = false;
  if (!reader && ctx.upstream) {
    // A local miss reads through to the origin; what it sends is checked and kept here, and
    // served from here like any stored artifact.
    auto fetched = ctx.upstream->Fetch(*key);
    if (fetched && *fetched) {
      opened = ctx.store->OpenReader(*key);
      if (opened) reader = std::move(*opened);
      from_upstream = reader != nullptr;
      if (from_upstream) res.set_header("X-Hlocache-Source", "upstream");
    } else if (!fetched && fetched.error().code() != StatusCode::kUnavailable) {
      std::fprintf(stderr, "hlocache: serve: %s\n", fetched.error().ToString().c_str());
    }
  }
  // The first chunk is read (and verified) before the status line goes out, so a corrupt
  // entry is a 404, never a 200 with bad bytes. A small artifact is one chunk.
  Result<std::span<const char>> first =
      reader ? reader->Next() : Result<std::span<const char>>(std::span<const char>());
  if (!reader || !first) {
    ctx.metrics.misses.fetch_add(1, std::memory_order_relaxed);
    CountFileMiss(ctx, req);
    return SendError(res, 404, "no artifact " + *key);
  }
  CountHit(ctx, *key, *first, from_upstream);
  const cache::EntryInfo& info = reader->info();
  const bool whole = first->size() == info.size;
  if (whole && first->size() <= kCopiedReplyBytes) {
    // The whole artifact in one verified chunk: one copy into the reply is cheaper than the
    // streaming machinery for the small artifacts that make up most hits.
    res.set_header("X-Hlocache-Checksum", info.checksum.Hex());
    res.body.assign(first->data(), first->size());
    res.set_header("Content-Type", kOctetStream);
    ctx.metrics.bytes_out.fetch_add(first->size(), std::memory_order_relaxed);
    return;
  }
  // Later hits on it are sent from memory; this one already is.
  if (ctx.memory_tier && whole) {
    if (auto body = KeepInMemory(ctx, info, *first))
      return SendMemoryBody(ctx, std::move(body), res);
  }
  res.set_header("X-Hlocache-Checksum", info.checksum.Hex());
  // A chunked artifact is copied into the memory tier as it streams out, and kept only once
  // the reader has checked the whole of it. (A ranged request may skip chunks: it fills nothing.)
  std::unique_ptr<MemoryBodyFiller> filler;
  if (ctx.memory_tier && !req.has_header("Range")) {
    filler = ctx.memory_tier->StartFilling(info.key, info.size, info.checksum);
    if (filler && !filler->Append(*first).ok()) filler = nullptr;
  }
  auto stream = std::make_shared<StoreStream>(ctx, std::move(reader), *first, std::move(filler));
  res.set_content_provider(info.size, kOctetStream,
                           [stream](size_t offset, size_t length, httplib::DataSink& sink) {
                             return stream->Provide(offset, length, sink);
                           });
}

void HandlePut(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
               const httplib::ContentReader& content_reader) {
  auto key = KeyOf(req, res);
  if (!key) return;
  if (!req.has_header("Content-Length")) {
    return SendError(res, 411, "an upload needs a Content-Length");
  }
  uint64_t length = 0;
  const std::string length_text = req.get_header_value("Content-Length");
  auto [end, ec] =
      std::from_chars(length_text.data(), length_text.data() + length_text.size(), length);
  if (ec != std::errc() || end != length_text.data() + length_text.size()) {
    return SendError(res, 400, "Content-Length is not a number");
  }
  if (length > ctx.options.max_body ||
      (ctx.options.max_size != 0 && length > ctx.options.max_size)) {
    ctx.metrics.rejected.fetch_add(1, std::memory_order_relaxed);
    res.set_header("Connection", "close");
    return SendError(
        res, 413,
        "artifact of " + std::to_string(length) + " bytes is larger than this server accepts");
  }
  VerifiedPut upload(*ctx.store, *key, length, ctx.options.verify_uploads);
  uint64_t received = 0;
  content_reader([&](const char* data, size_t size) {
    received += size;
    upload.Receive(std::string_view(data, size));
    // A failed upload is read to the end too (it is bounded by --max-body and the I/O
    // timeout): a client still sending would otherwise see its connection reset instead of
    // the answer.
    return true;
  });
  ctx.metrics.bytes_in.fetch_add(received, std::memory_order_relaxed);
  auto outcome = upload.Finish();
  if (!outcome) {
    ctx.metrics.rejected.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, HttpStatusOf(outcome.error()), outcome.error().message());
  }
  const bool stored = *outcome == cache::PutOutcome::kStored;
  if (stored) {
    ctx.metrics.uploads.fetch_add(1, std::memory_order_relaxed);
    if (upload.info().target == compiler::kFileTarget) {
      ctx.metrics.CountFile(upload.info().compiler_id, FileOutcome::kWrite);
    }
    if (ctx.upstream) ctx.upstream->QueueUpload(*key);
  }
  res.status = stored ? 201 : 200;
  res.set_content(stored ? "stored\n" : "already stored\n", "text/plain");
}

void HandleEmptyPut(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Content-Length")) {
    return SendError(res, 411, "an upload needs a Content-Length");
  }
  SendError(res, 400, "an empty body is not an artifact");
}

void HandleDelete(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto key = KeyOf(req, res);
  if (!key) return;
  if (ctx.memory_tier) ctx.memory_tier->Erase(*key);
  auto erased = ctx.store->Erase(*key);
  if (!erased) return SendError(res, HttpStatusOf(erased.error()), erased.error().message());
  if (!*erased) return SendError(res, 404, "no artifact " + *key);
  res.status = 204;
}

}  // namespace

namespace {

// What the library writes for a route's reply: its headers sorted by name, with the Keep-Alive
// it adds on a connection that stays open or the Connection: close on one that does not
// (QuickPathTest compares the two). `checksum` empty: no X-Hlocache-Checksum. The library
// says Accept-Ranges in its reply to every HEAD.
std::string QuickReplyHead(int status, uint64_t content_length, std::string_view content_type,
                           std::string_view checksum, std::string_view keep_alive,
                           bool accept_ranges = false) {
  std::string head;
  head.reserve(192 + keep_alive.size());
  head.append(status == 200 ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n");
  if (accept_ranges) head.append("Accept-Ranges: bytes\r\n");
  if (keep_alive.empty()) head.append("Connection: close\r\n");
  head.append("Content-Length: ")
      .append(std::to_string(content_length))
      .append("\r\nContent-Type: ")
      .append(content_type)
      .append("\r\n");
  if (!keep_alive.empty()) head.append("Keep-Alive: ").append(keep_alive).append("\r\n");
  if (!checksum.empty()) head.append("X-Hlocache-Checksum: ").append(checksum).append("\r\n");
  head.append("\r\n");
  return head;
}

// The route's 404 for a key not stored: SendError's body, and the miss of a file artifact
// counted for the namespace the request names.
void QuickNotFound(ServerContext& ctx, std::string_view key, const QuickRequest& request,
                   QuickReply& reply) {
  CountFileMiss(ctx, request.file_namespace);
  auto text = std::make_shared<std::string>(ErrorText("no artifact " + std::string(key)));
  reply.status = 404;
  reply.body = std::span<const char>(text->data(), text->size());
  reply.owner = std::move(text);
  reply.head = QuickReplyHead(404, reply.body.size(), kErrorContentType, "", request.keep_alive,
                              /*accept_ranges=*/request.head_only);
}

// HEAD, as HandleHead answers it from the catalog. Behind --upstream a key not stored here is
// asked of the origin: the route's.
bool AnswerQuickHead(ServerContext& ctx, std::string_view key, const QuickRequest& request,
                     QuickReply& reply) {
  auto info = ctx.store->Info(key);
  if (!info) return false;  // The route says what failed.
  if (!*info) {
    if (ctx.upstream || request.accept_encoding) return false;
    QuickNotFound(ctx, key, request, reply);
    return true;
  }
  reply.head =
      QuickReplyHead(200, (*info)->size, kOctetStream, (*info)->checksum.Hex(), request.keep_alive,
                     /*accept_ranges=*/true);
  return true;
}

}  // namespace

bool AnswerQuickHit(ServerContext& ctx, std::string_view key, const QuickRequest& request,
                    QuickReply& reply) {
  if (!cache::IsWellFormedKey(key)) return false;
  if (request.head_only) return AnswerQuickHead(ctx, key, request, reply);
  std::string checksum;
  if (std::shared_ptr<const MemoryBody> body = ctx.memory_tier ? FindInMemory(ctx, key) : nullptr) {
    CountHit(ctx, key, body->bytes(), /*from_upstream=*/false);
    ctx.metrics.memory_hits.fetch_add(1, std::memory_order_relaxed);
    checksum = body->checksum().Hex();
    reply.body = body->bytes();
    reply.body_fd = FileToSendFrom(ctx, *body);
    reply.body_offset = 0;
    reply.owner = std::move(body);
  } else {
    // The store is asked once, here or by the route: its counters see one read a request. A
    // miss behind --upstream reads through to the origin, and is the route's; so is one to a
    // request that accepts encodings, whose text reply the library compresses.
    if (ctx.upstream || request.accept_encoding) return false;
    auto opened = ctx.store->OpenReader(key);
    if (!opened) return false;  // The route says what failed.
    if (!*opened) {
      ctx.metrics.misses.fetch_add(1, std::memory_order_relaxed);
      QuickNotFound(ctx, key, request, reply);
      return true;
    }
    // A small artifact, read and verified whole as HandleGet does. A larger one is the route's
    // (before its first chunk is read: it reads it), as is a chunk that fails its check (the
    // reader quarantined the entry: the route then finds no entry).
    std::shared_ptr<cache::ArtifactReader> reader(std::move(*opened));
    if (reader->info().size > kCopiedReplyBytes) return false;
    const Result<std::span<const char>> first = reader->Next();
    if (!first || first->size() != reader->info().size) return false;
    CountHit(ctx, key, *first, /*from_upstream=*/false);
    checksum = reader->info().checksum.Hex();
    reply.body = *first;
    reply.owner = std::move(reader);
  }
  reply.head = QuickReplyHead(200, reply.body.size(), kOctetStream, checksum, request.keep_alive);
  return true;
}

void RegisterArtifactRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(kArtifactPath, [&ctx](const httplib::Request& req, httplib::Response& res) {
    HandleGet(ctx, req, res);
  });
  http.Put(kArtifactPath,
           [&ctx](const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader) { HandlePut(ctx, req, res, reader); });
  http.Put(kArtifactPath,
           [](const httplib::Request& req, httplib::Response& res) { HandleEmptyPut(req, res); });
  http.Delete(kArtifactPath, [&ctx](const httplib::Request& req, httplib::Response& res) {
    HandleDelete(ctx, req, res);
  });
}

}  // namespace hlocache::server
