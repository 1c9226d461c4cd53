// What PyTorch/XLA's persistent cache does with its directory (torch_xla/csrc/runtime/cache.h,
// PersistentCache), as a small program the mount tests run against `hlocache mount`:
//
//   xla_cache_pattern put DIR HASH SIZE SEED [DELAY_MS]
//       std::ofstream straight onto DIR/HASH.bin (no temporary file, no rename, no fsync), the
//       "serialized executable" written 1 MiB at a time, DELAY_MS between pieces.
//   xla_cache_pattern get DIR HASH
//       std::filesystem::exists, then std::ifstream of the whole file, then "deserialize": on
//       failure the file is removed (as PersistentCache::Get does) and the exit status is 3.
//       Prints "hit SIZE SEED" (exit 0) or "miss" (exit 4).
//
// The serialized form: "XLAEXE01", the payload size and the seed (8 bytes each), then the
// payload, every byte of which follows from the seed. "Deserializing" checks all of it, so a
// partial or mixed file is caught.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

namespace {

constexpr char kMagic[] = "XLAEXE01";
constexpr size_t kHeader = 24;

uint64_t Next(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// The serialized executable's bytes [offset, offset + n) into out; offset a multiple of 8.
void Payload(uint64_t seed, uint64_t offset, size_t n, char* out) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1 + offset / 8;
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = Next(state) ^ (offset + i);
    std::memcpy(out + i, &v, std::min<size_t>(8, n - i));
    state += 0x632be59bd9b4e019ull;
  }
}

void PutU64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint64_t GetU64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

int Put(const std::filesystem::path& dir, const std::string& hash, uint64_t size, uint64_t seed,
        int delay_ms) {
  const std::filesystem::path path = dir / (hash + ".bin");
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    std::cerr << "cannot open " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::string head(kMagic, 8);
  PutU64(head, size);
  PutU64(head, seed);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  constexpr size_t kPiece = 1 << 20;
  std::string piece(kPiece, '\0');
  for (uint64_t at = 0; at < size; at += kPiece) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, size - at));
    Payload(seed, at, n, piece.data());
    out.write(piece.data(), static_cast<std::streamsize>(n));
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  out.close();
  if (!out) {
    std::cerr << "writing " << path << " failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  return 0;
}

int Get(const std::filesystem::path& dir, const std::string& hash) {
  const std::filesystem::path path = dir / (hash + ".bin");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::cout << "miss\n";
    return 4;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  bool ok = bytes.size() >= kHeader && bytes.compare(0, 8, kMagic) == 0;
  uint64_t size = 0, seed = 0;
  if (ok) {
    size = GetU64(bytes, 8);
    seed = GetU64(bytes, 16);
    ok = bytes.size() == kHeader + size;
  }
  std::string expected(1 << 20, '\0');
  for (uint64_t at = 0; ok && at < size; at += expected.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(expected.size(), size - at));
    Payload(seed, at, n, expected.data());
    ok = std::memcmp(bytes.data() + kHeader + at, expected.data(), n) == 0;
  }
  if (!ok) {
    // PersistentCache removes what it cannot deserialize.
    std::filesystem::remove(path, ec);
    std::cout << "corrupt " << bytes.size() << "\n";
    return 3;
  }
  std::cout << "hit " << size << " " << seed << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 6 && std::string(argv[1]) == "put") {
    return Put(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10),
               std::strtoull(argv[5], nullptr, 10), argc > 6 ? std::atoi(argv[6]) : 0);
  }
  if (argc == 4 && std::string(argv[1]) == "get") return Get(argv[2], argv[3]);
  std::cerr << "usage: xla_cache_pattern put DIR HASH SIZE SEED [DELAY_MS] | get DIR HASH\n";
  return 2;
}
