// Whether bytes start a zstd frame of the current format (RFC 8878: the magic number
// ZSTD_MAGICNUMBER, little-endian), for readers of bytes that come from elsewhere. libzstd also
// decodes the frames of zstd's 0.x formats, and sizes their windows by those formats' own rules,
// past the bound a reader sets (ZSTD_d_windowLogMax): 28 bytes of a 0.7 frame asked for 96 MB.
// A skippable frame is refused too. Header-only: its users link libzstd already.
//
// Thread safety: pure function.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <string_view>

namespace hlocache {

inline bool StartsCurrentZstdFrame(std::string_view bytes) {
  if (bytes.size() < 4) return false;
  uint32_t magic = 0;
  for (int i = 3; i >= 0; --i) magic = (magic << 8) | static_cast<uint8_t>(bytes[i]);
  return magic == ZSTD_MAGICNUMBER;
}

}  // namespace hlocache
