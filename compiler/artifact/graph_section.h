// The canonical module an artifact was built from, carried in its header (field `graph_zstd`)
// so that a server can compute the artifact's key again instead of trusting the uploader's
// (`hlocache serve --verify-uploads`). zstd, then base64 so that it fits in the JSON header.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace hlocache::compiler {

// The largest encoded graph an artifact carries; a larger one is left out (the header must
// stay under the container's 1 MiB), and such an artifact cannot be verified by re-keying.
inline constexpr size_t kMaxEncodedGraphBytes = size_t{768} << 10;

// The encoded graph, or "" when it would be larger than kMaxEncodedGraphBytes.
std::string EncodeGraph(std::string_view canonical_text);

// The canonical text back. Errors: kDataLoss when `encoded` is not base64 of a zstd frame.
Result<std::string> DecodeGraph(std::string_view encoded);

}  // namespace hlocache::compiler
