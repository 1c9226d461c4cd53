#include "compiler/artifact/graph_section.h"

#include <openssl/evp.h>
#include <zstd.h>

#include "common/zstd_frame.h"

namespace hlocache::compiler {
namespace {

// The decompressed size a graph may claim: more than any module the parser would accept.
constexpr unsigned long long kMaxGraphBytes = 1ull << 30;
// zstd's window: 8 MiB, what levels up to 19 use; EncodeGraph's level 3 uses 2 MiB at most.
constexpr int kMaxWindowLog = 23;
// The text is handed out this much at a time.
constexpr size_t kPieceBytes = 64 << 10;

}  // namespace

std::string EncodeGraph(std::string_view canonical_text) {
  std::string compressed(ZSTD_compressBound(canonical_text.size()), '\0');
  const size_t n = ZSTD_compress(compressed.data(), compressed.size(), canonical_text.data(),
                                 canonical_text.size(), 3);
  if (ZSTD_isError(n)) return "";
  const size_t encoded_size = 4 * ((n + 2) / 3);
  if (encoded_size > kMaxEncodedGraphBytes) return "";
  std::string encoded(encoded_size + 1, '\0');  // EVP_EncodeBlock writes a final NUL.
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                      reinterpret_cast<const unsigned char*>(compressed.data()),
                                      static_cast<int>(n));
  encoded.resize(static_cast<size_t>(written));
  return encoded;
}

Result<std::unique_ptr<GraphReader>> GraphReader::Open(std::string_view encoded) {
  if (encoded.empty() || encoded.size() % 4 != 0 || encoded.size() > kMaxEncodedGraphBytes) {
    return Error(DataLoss("the artifact's graph is not base64 of a sensible size"));
  }
  std::string compressed(encoded.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(compressed.data()),
                                reinterpret_cast<const unsigned char*>(encoded.data()),
                                static_cast<int>(encoded.size()));
  if (n < 0) return Error(DataLoss("the artifact's graph is not base64"));
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t size = static_cast<size_t>(n);
  for (size_t i = encoded.size(); i > 0 && encoded[i - 1] == '='; --i) --size;
  compressed.resize(size);
  // Only the current format's frames, which the writer writes: the 0.x formats' windows are
  // not held to kMaxWindowLog, and a skippable frame holds no graph.
  if (!StartsCurrentZstdFrame(compressed)) {
    return Error(DataLoss("the artifact's graph is not a zstd frame of the current format"));
  }
  const unsigned long long claimed = ZSTD_getFrameContentSize(compressed.data(), size);
  if (claimed == ZSTD_CONTENTSIZE_ERROR || claimed == ZSTD_CONTENTSIZE_UNKNOWN ||
      claimed > kMaxGraphBytes) {
    return Error(DataLoss("the artifact's graph is not a zstd frame of a known, sensible size"));
  }
  return std::unique_ptr<GraphReader>(new GraphReader(std::move(compressed), claimed));
}

GraphReader::GraphReader(std::string compressed, uint64_t size)
    : compressed_(std::move(compressed)),
      size_(size),
      buffer_(kPieceBytes, '\0'),
      stream_(ZSTD_createDCtx()) {
  if (stream_ != nullptr) {  // Else Next says so.
    ZSTD_DCtx_setParameter(static_cast<ZSTD_DCtx*>(stream_), ZSTD_d_windowLogMax, kMaxWindowLog);
  }
}

GraphReader::~GraphReader() { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(stream_)); }

Result<std::string_view> GraphReader::Next() {
  if (frame_ended_) {
    if (consumed_ != compressed_.size()) {
      return Error(DataLoss("the artifact's graph has bytes after its zstd frame"));
    }
    if (produced_ != size_) {
      return Error(DataLoss("the artifact's graph decompresses to " + std::to_string(produced_) +
                            " bytes, not the " + std::to_string(size_) + " it declares"));
    }
    return std::string_view();
  }
  if (stream_ == nullptr) return Error(ResourceExhausted("cannot start a zstd decompression"));
  ZSTD_inBuffer in{compressed_.data(), compressed_.size(), consumed_};
  ZSTD_outBuffer out{buffer_.data(), buffer_.size(), 0};
  while (out.pos == 0) {
    const size_t before = in.pos;
    const size_t left = ZSTD_decompressStream(static_cast<ZSTD_DCtx*>(stream_), &out, &in);
    if (ZSTD_isError(left)) {
      return Error(DataLoss(std::string("the artifact's graph does not decompress (") +
                            ZSTD_getErrorName(left) + ")"));
    }
    if (left == 0) {
      frame_ended_ = true;
      break;
    }
    if (out.pos == 0 && in.pos == before) {
      return Error(DataLoss("the artifact's graph ends inside its zstd frame"));
    }
  }
  consumed_ = in.pos;
  produced_ += out.pos;
  if (produced_ > size_) {
    return Error(DataLoss("the artifact's graph decompresses past the " + std::to_string(size_) +
                          " bytes it declares"));
  }
  if (out.pos == 0) return Next();  // The frame ended with this call: check its end.
  return std::string_view(buffer_.data(), out.pos);
}

Result<std::string> DecodeGraph(std::string_view encoded) {
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<GraphReader> reader, GraphReader::Open(encoded));
  std::string text;
  while (true) {
    HLOCACHE_ASSIGN_OR_RETURN(std::string_view piece, reader->Next());
    if (piece.empty()) return text;
    text.append(piece);
  }
}

}  // namespace hlocache::compiler
