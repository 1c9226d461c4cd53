// What the differential fuzz targets share: the finding itself, and bytes handed to a streaming
// reader in pieces of sizes the input chooses, as a socket or a file would deliver them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace hlocache::fuzzing {

// A finding: libFuzzer reports the input that got here.
inline void Check(bool ok) {
  if (!ok) std::abort();
}

// Calls `feed(piece)` with `bytes` cut into pieces of 1 to `most` bytes, their sizes drawn from
// a generator seeded with `seed` (seed 0: one piece, the whole), until all are fed or `feed`
// returns false.
template <typename Feed>
void FeedInPieces(std::string_view bytes, uint32_t seed, size_t most, Feed feed) {
  uint32_t state = seed;
  size_t at = 0;
  while (at < bytes.size()) {
    size_t take = bytes.size() - at;
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      take = std::min<size_t>(take, 1 + ((state >> 16) % most));
    }
    const std::string_view piece = bytes.substr(at, take);
    at += take;
    if (!feed(piece)) return;
  }
}

}  // namespace hlocache::fuzzing
