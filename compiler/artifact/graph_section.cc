#include "compiler/artifact/graph_section.h"

#include <openssl/evp.h>
#include <zstd.h>

namespace hlocache::compiler {
namespace {

// The decompressed size a graph may claim: more than any module the parser would accept.
constexpr unsigned long long kMaxGraphBytes = 1ull << 30;

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

Result<std::string> DecodeGraph(std::string_view encoded) {
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
  const unsigned long long claimed = ZSTD_getFrameContentSize(compressed.data(), size);
  if (claimed == ZSTD_CONTENTSIZE_ERROR || claimed == ZSTD_CONTENTSIZE_UNKNOWN ||
      claimed > kMaxGraphBytes) {
    return Error(DataLoss("the artifact's graph is not a zstd frame of a known, sensible size"));
  }
  std::string text(static_cast<size_t>(claimed), '\0');
  const size_t got = ZSTD_decompress(text.data(), text.size(), compressed.data(), size);
  if (ZSTD_isError(got) || got != text.size()) {
    return Error(DataLoss("the artifact's graph does not decompress"));
  }
  return text;
}

}  // namespace hlocache::compiler
