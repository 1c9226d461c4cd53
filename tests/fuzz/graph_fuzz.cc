// libFuzzer target: any bytes as the graph an uploaded artifact carries (graph_zstd,
// compiler/artifact/graph_section.h), which `hlocache serve --verify-uploads` decompresses to key
// it again.
//
// The first byte chooses how the rest is used: as the zstd frame itself, or as a text that
// EncodeGraph compresses and whose frame then has one byte changed (the second byte says which,
// the third to what), so that mutations reach deep into real frames. The reader must agree with
// zstd's one-shot decompression on every frame that declares a modest size, hand out pieces
// that add up to the size it reported, and stay within the memory limit the suite runs this
// target with (-malloc_limit_mb): a frame may claim a gigabyte in a dozen bytes.
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/artifact/graph_section.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/hostile_graphs.h"

namespace {

using hlocache::fuzzing::Check;

// What zstd's one-shot call makes of the frame, when it declares at most `most` bytes; nullopt
// when it refuses it, or declares more.
std::optional<std::string> OneShot(std::string_view frame, uint64_t most) {
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > most) {
    return std::nullopt;
  }
  std::string out(static_cast<size_t>(size), '\0');
  const size_t got = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(got) || got != out.size()) return std::nullopt;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hlocache::compiler::GraphReader;
  if (size < 3) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::string frame;
  if (data[0] & 1) {
    frame = std::string(rest);
  } else {
    // What the writer writes reads back.
    const auto decoded = hlocache::compiler::DecodeGraph(hlocache::compiler::EncodeGraph(rest));
    Check(decoded.has_value() && *decoded == rest);
    frame.resize(ZSTD_compressBound(rest.size()));
    const size_t n = ZSTD_compress(frame.data(), frame.size(), rest.data(), rest.size(), 3);
    Check(!ZSTD_isError(n) && n > 0);
    frame.resize(n);
    frame[data[1] % frame.size()] = static_cast<char>(data[2]);
  }

  auto reader = GraphReader::Open(hlocache::testing::Base64(frame));
  if (!reader) {
    Check(reader.error().message().find('\n') == std::string::npos);
    return 0;
  }
  constexpr size_t kCompared = 1 << 20;
  uint64_t total = 0;
  std::string text;  // Its first kCompared bytes.
  bool ok = true;
  while (true) {
    auto piece = (*reader)->Next();
    if (!piece) {
      ok = false;
      Check(piece.error().message().find('\n') == std::string::npos);
      break;
    }
    if (piece->empty()) break;
    total += piece->size();
    Check(total <= (*reader)->size());
    if (text.size() < kCompared) text.append(piece->substr(0, kCompared - text.size()));
  }
  if (!ok) return 0;  // It may refuse more than zstd does: bytes after the frame, wide windows.
  Check(total == (*reader)->size());
  if ((*reader)->size() <= kCompared) {
    // zstd's own one-shot reading of a frame the reader took: the same text.
    const auto reference = OneShot(frame, kCompared);
    Check(reference.has_value() && *reference == text);
  }
  return 0;
}
