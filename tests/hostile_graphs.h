// For tests of artifacts whose carried graph (compiler/artifact/graph_section.h) is hostile:
// zstd frames made by hand, in base64 as a header holds them, and the peak memory of a
// process, which shows what reading one cost.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

namespace hlocache::testing {

// Base64 as EncodeGraph writes it (RFC 4648, padded).
inline std::string Base64(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += kDigits[(v >> 18) & 63];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

// A zstd frame (RFC 8878) declaring `declared` bytes of content and holding `content` in one
// raw block, then `after`. One segment, or, given a window's exponent, a frame whose window is
// 2^(10 + exponent) bytes.
inline std::string ZstdFrame(uint64_t declared, std::string_view content,
                             std::string_view after = "", int window_exponent = -1) {
  std::string f = "\x28\xb5\x2f\xfd";
  if (window_exponent < 0) {
    f += '\xe0';  // Frame header descriptor: an 8-byte content size, single segment.
  } else {
    f += '\xc0';  // An 8-byte content size after a window descriptor.
    f += static_cast<char>(window_exponent << 3);
  }
  for (int i = 0; i < 8; ++i) f += static_cast<char>((declared >> (8 * i)) & 0xff);
  const uint32_t block = 1 | (static_cast<uint32_t>(content.size()) << 3);  // Last, raw.
  for (int i = 0; i < 3; ++i) f += static_cast<char>((block >> (8 * i)) & 0xff);
  f += content;
  f += after;
  return f;
}

// A frame of zstd's 0.7 format (magic 0xFD2FB527), which libzstd still reads, sizing its window
// by that format's rules and not by the limit set for current frames: these 28 bytes, found by
// the graph fuzz target, made a reader ask for 96 MB.
inline std::string LegacyZstdFrame() {
  return std::string(
      "\x27\xb5\x2f\xfd\xa0\x8f\x00\xc0\x05\x00\x00\x00\x00\x00\x33\x00\x00\x00\x00\x29"
      "\x00\x00h.ello",
      28);
}

// The peak resident memory of process `pid` ("self" when 0) since the last reset, in bytes
// (VmHWM); resets it first when asked. 0 when it cannot be read.
inline uint64_t PeakResidentBytes(pid_t pid, bool reset) {
  const std::string proc = "/proc/" + (pid == 0 ? std::string("self") : std::to_string(pid));
  if (reset) std::ofstream(proc + "/clear_refs") << "5";
  std::ifstream status(proc + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace hlocache::testing
