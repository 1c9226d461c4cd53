// The canonical module an artifact was built from, carried in its header (field `graph_zstd`)
// so that a server can compute the artifact's key again instead of trusting the uploader's
// (`hlocache serve --verify-uploads`). zstd, then base64 so that it fits in the JSON header.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache::compiler {

// The largest encoded graph an artifact carries; a larger one is left out (the header must
// stay under the container's 1 MiB), and such an artifact cannot be verified by re-keying.
inline constexpr size_t kMaxEncodedGraphBytes = size_t{768} << 10;

// The encoded graph, or "" when it would be larger than kMaxEncodedGraphBytes.
std::string EncodeGraph(std::string_view canonical_text);

// The canonical text of an encoded graph, read a piece at a time and never held whole: a
// graph comes from whoever uploaded the artifact, and a few kilobytes of zstd can decompress to
// a gigabyte. Memory: the compressed bytes, zstd's window (a frame that asks for more than
// 8 MiB is refused; the writer's level keeps to 2 MiB) and a 64 KiB buffer, whatever size the
// frame declares; nothing is allocated for the declared size.
//
// The graph must be one zstd frame of the current format (RFC 8878; not one of the 0.x
// formats, not a skippable frame) that declares its content size (at most 1 GiB), and nothing
// after it. Errors (kDataLoss) from Open for what its header shows, from Next for the rest: a
// corrupt frame, one that ends early, or content longer or shorter than it declared.
// Thread safety: none; one graph, one thread.
class GraphReader {
 public:
  static Result<std::unique_ptr<GraphReader>> Open(std::string_view encoded);
  ~GraphReader();
  GraphReader(const GraphReader&) = delete;
  GraphReader& operator=(const GraphReader&) = delete;

  // The text's size, as the frame declares it: known before any of it is read.
  uint64_t size() const { return size_; }
  // The text's next piece, valid until the next call; empty once all of it has been read.
  Result<std::string_view> Next();

 private:
  GraphReader(std::string compressed, uint64_t size);

  std::string compressed_;
  size_t consumed_ = 0;  // Bytes of compressed_ zstd has taken.
  uint64_t size_;
  uint64_t produced_ = 0;
  bool frame_ended_ = false;
  std::string buffer_;
  void* stream_;  // ZSTD_DCtx, kept out of this header.
};

// The canonical text back, whole: GraphReader's pieces joined (memory grows with what the
// frame holds, not with what it claims). Errors: kDataLoss as GraphReader's.
Result<std::string> DecodeGraph(std::string_view encoded);

}  // namespace hlocache::compiler
