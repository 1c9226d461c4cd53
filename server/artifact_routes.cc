// GET, HEAD, PUT and DELETE of /v1/artifacts/{key}.
#include <charconv>
#include <memory>

#include "cache/key.h"
#include "compiler/artifact/stream_check.h"
#include "server/context.h"

namespace hlocache::server {
namespace {

constexpr const char* kArtifactPath = R"(/v1/artifacts/([^/]*))";
constexpr const char* kOctetStream = "application/octet-stream";
// Uploads up to this size are verified in memory and stored with one write; larger ones are
// streamed into the store chunk by chunk as they arrive.
constexpr uint64_t kBufferedUploadBytes = uint64_t{4} << 20;
// Replies up to this size are copied into the response; larger ones are sent from the
// store's buffer.
constexpr size_t kCopiedReplyBytes = 64 << 10;

// The key from the path, or an error answered with 400.
std::optional<std::string> KeyOf(const httplib::Request& req, httplib::Response& res) {
  std::string key = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (!cache::IsWellFormedKey(key)) {
    SendError(res, 400, "malformed key: a key is 'v1-' and 32 lowercase hex digits");
    return std::nullopt;
  }
  return key;
}

void HandleHead(ServerContext& ctx, const std::string& key, httplib::Response& res) {
  auto info = ctx.store->Info(key);
  if (!info) return SendError(res, HttpStatusOf(info.error()), info.error().message());
  if (!*info) return SendError(res, 404, "no artifact " + key);
  res.set_header("X-Hlocache-Checksum", (*info)->checksum.Hex());
  // HEAD never calls the provider; it only carries the length.
  res.set_content_provider((*info)->size, kOctetStream,
                           [](size_t, size_t, httplib::DataSink&) { return false; });
}

void HandleGet(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto key = KeyOf(req, res);
  if (!key) return;
  if (req.method == "HEAD") return HandleHead(ctx, *key, res);
  auto opened = ctx.store->OpenReader(*key);
  if (!opened) {
    ctx.metrics.store_errors.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, HttpStatusOf(opened.error()), opened.error().message());
  }
  std::shared_ptr<cache::ArtifactReader> reader(std::move(*opened));
  // The first chunk is read (and verified) before the status line goes out, so a corrupt
  // entry is a 404, never a 200 with bad bytes. A small artifact is one chunk.
  Result<std::span<const char>> first =
      reader ? reader->Next() : Result<std::span<const char>>(std::span<const char>());
  if (!reader || !first) {
    ctx.metrics.misses.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, 404, "no artifact " + *key);
  }
  ctx.metrics.hits.fetch_add(1, std::memory_order_relaxed);
  const double saved = compiler::PeekCompileSeconds(std::string_view(first->data(), first->size()));
  ctx.metrics.compile_saved_micros.fetch_add(static_cast<uint64_t>(saved * 1e6),
                                             std::memory_order_relaxed);
  res.set_header("X-Hlocache-Checksum", reader->info().checksum.Hex());
  if (first->size() == reader->info().size && first->size() <= kCopiedReplyBytes) {
    // The whole artifact in one verified chunk: one copy into the reply is cheaper than the
    // streaming machinery for the small artifacts that make up most hits.
    res.body.assign(first->data(), first->size());
    res.set_header("Content-Type", kOctetStream);
    ctx.metrics.bytes_out.fetch_add(first->size(), std::memory_order_relaxed);
    return;
  }
  auto pending = std::make_shared<std::span<const char>>(*first);
  Metrics* metrics = &ctx.metrics;
  res.set_content_provider(reader->info().size, kOctetStream,
                           [reader, pending, metrics](size_t, size_t, httplib::DataSink& sink) {
                             std::span<const char> chunk = *pending;
                             if (chunk.empty()) {
                               auto next = reader->Next();
                               // A chunk that fails its check mid-stream ends the connection short
                               // of the length the client was promised, so the client can tell, and
                               // nothing bad is handed on.
                               if (!next || next->empty()) return false;
                               chunk = *next;
                             }
                             *pending = {};
                             if (!sink.write(chunk.data(), chunk.size())) return false;
                             metrics->bytes_out.fetch_add(chunk.size(), std::memory_order_relaxed);
                             return true;
                           });
}

// An upload in progress: bytes are checked as they arrive; small artifacts are collected and
// stored whole, large ones streamed into a store writer once their header has been read.
class Upload {
 public:
  Upload(ServerContext& ctx, std::string key, uint64_t declared_length)
      : ctx_(ctx), key_(std::move(key)), length_(declared_length) {}

  // Takes the next bytes of the body. After a failure the rest of the body is read and
  // dropped (it is bounded by --max-body and the I/O timeout): a client still sending would
  // otherwise see its connection reset instead of the answer.
  bool Receive(const char* data, size_t size) {
    if (status_ != 0) return true;
    const std::string_view bytes(data, size);
    if (Status s = checker_.Feed(bytes); !s.ok()) return Fail(400, "bad artifact: " + s.message());
    if (checker_.bytes_seen() > length_) return Fail(400, "body longer than its Content-Length");
    if (writer_) {
      if (Status s = writer_->Append(bytes); !s.ok()) return Fail(HttpStatusOf(s), s.message());
      return true;
    }
    buffer_.append(bytes);
    if (checker_.declared_size() == 0) return true;  // The header has not all arrived yet.
    if (checker_.declared_size() != length_) {
      return Fail(400, "artifact declares " + std::to_string(checker_.declared_size()) +
                           " bytes but the body has " + std::to_string(length_));
    }
    if (!header_checked_ && !CheckHeader()) return false;
    if (length_ > kBufferedUploadBytes && !writer_) {
      auto writer = ctx_.store->StartPut(key_, info_);
      if (!writer) return Fail(HttpStatusOf(writer.error()), writer.error().message());
      writer_ = std::move(*writer);
      if (Status s = writer_->Append(buffer_); !s.ok()) return Fail(HttpStatusOf(s), s.message());
      std::string().swap(buffer_);
    }
    return true;
  }

  // After the whole body: stores the artifact. The HTTP status to answer with.
  int Finish(std::string& message) {
    if (status_ != 0) {
      message = error_;
      return status_;
    }
    auto header = checker_.Finish();
    if (!header) {
      message = "bad artifact: " + header.error().message();
      return 400;
    }
    if (!header_checked_ && !CheckHeader()) {
      message = error_;
      return status_;
    }
    Result<cache::PutOutcome> outcome =
        writer_ ? writer_->Commit() : ctx_.store->Put(key_, buffer_, info_);
    if (!outcome) {
      message = outcome.error().message();
      return HttpStatusOf(outcome.error());
    }
    message = *outcome == cache::PutOutcome::kStored ? "stored" : "already stored";
    return *outcome == cache::PutOutcome::kStored ? 201 : 200;
  }

 private:
  bool Fail(int status, std::string reason) {
    status_ = status;
    error_ = std::move(reason);
    return false;
  }

  // The header must name this URL's key; with --verify-uploads its target and payload kind
  // must also make sense together.
  bool CheckHeader() {
    header_checked_ = true;
    auto header = compiler::PeekArtifactHeader(buffer_);
    if (!header) return Fail(400, "bad artifact: " + header.error().message());
    if (header->key != key_) {
      return Fail(400, "the artifact was built for key " + header->key + ", not " + key_);
    }
    if (ctx_.options.verify_uploads) {
      if (Status s = cache::ValidateTarget(header->target); !s.ok()) return Fail(400, s.message());
      if (Status s = cache::ValidateCompilerId(header->compiler_id); !s.ok()) {
        return Fail(400, s.message());
      }
      const bool gpu = header->target.starts_with("cuda-");
      const std::string_view expected =
          gpu ? compiler::kPayloadCubinPlan : compiler::kPayloadSharedObject;
      if (header->payload_kind != expected) {
        return Fail(400, "payload kind '" + header->payload_kind + "' does not run on target " +
                             header->target);
      }
    }
    info_.target = header->target;
    info_.compiler_id = header->compiler_id;
    info_.compile_seconds = header->compile_seconds;
    return true;
  }

  ServerContext& ctx_;
  const std::string key_;
  const uint64_t length_;
  compiler::ArtifactStreamChecker checker_;
  cache::ArtifactInfo info_;
  std::string buffer_;
  std::unique_ptr<cache::ArtifactWriter> writer_;  // Discards what it wrote unless committed.
  bool header_checked_ = false;
  int status_ = 0;
  std::string error_;
};

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
  Upload upload(ctx, *key, length);
  uint64_t received = 0;
  content_reader([&](const char* data, size_t size) {
    received += size;
    upload.Receive(data, size);
    return true;  // Failed uploads are read to the end too (see Upload::Receive).
  });
  ctx.metrics.bytes_in.fetch_add(received, std::memory_order_relaxed);
  std::string message;
  const int status = upload.Finish(message);
  if (status >= 400) {
    ctx.metrics.rejected.fetch_add(1, std::memory_order_relaxed);
    return SendError(res, status, message);
  }
  if (status == 201) ctx.metrics.uploads.fetch_add(1, std::memory_order_relaxed);
  res.status = status;
  res.set_content(message + "\n", "text/plain");
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
  auto erased = ctx.store->Erase(*key);
  if (!erased) return SendError(res, HttpStatusOf(erased.error()), erased.error().message());
  if (!*erased) return SendError(res, 404, "no artifact " + *key);
  res.status = 204;
}

}  // namespace

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
