// store_crash_child DIR SEED: opens cache::Store on DIR and puts artifacts forever, until the
// parent (store_crash_test.cc) kills it with SIGKILL at a random instant.
//
// Every artifact is a pure function of its key (see crash_artifact below), so the parent can check
// any key it finds in the store without knowing what the child did. The child keeps two logs in
// DIR/.. (plain write(2) with O_APPEND, one line each, so they survive SIGKILL):
//   attempts.log   "opened PID" once the store is open; "put KEY" before a put starts;
//                  "erase KEY" before an erase starts.
//   committed.log  "KEY" after a put returned OK; "erased KEY" after an erase returned OK.
//
// The generator below is shared with the test, which includes this file with
// HLOCACHE_CRASH_CHILD_NO_MAIN defined (the build allows only these test sources, and the parent
// must compute exactly the bytes the child wrote).
#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.h"

namespace crash_artifact {

// Chunk size used by both the child and the parent: artifacts of 100-600 KiB span 2-10 chunks.
inline constexpr uint32_t kChunkBytes = 64u << 10;

// Past this many live keys the child erases two keys per put, which bounds the store (and the
// time the parent needs to read all of it back after each kill). Smaller under ASan, where reading
// back is several times slower.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr size_t kLiveCap = 40;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr size_t kLiveCap = 40;
#else
inline constexpr size_t kLiveCap = 120;
#endif
#else
inline constexpr size_t kLiveCap = 120;
#endif

// Every 4 KiB of artifact content starts with a marker naming the key and the offset:
//   "<<HLOART v1-<32 hex> @<8 hex offset>>>"
// so a test can find artifact bytes inside the store's (private) LevelDB records.
inline constexpr std::string_view kMarkerPrefix = "<<HLOART ";
inline constexpr size_t kMarkerEvery = 4096;
inline constexpr size_t kMarkerLength = 9 + 35 + 2 + 8 + 2;

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A bijection on 64-bit values (xorshifts by >= 32 are involutions; odd multipliers invert), so
// keys look random and still decode.
inline constexpr uint64_t kMul1 = 0xff51afd7ed558ccdull;
inline constexpr uint64_t kMul2 = 0xc4ceb9fe1a85ec53ull;
inline constexpr uint64_t InverseOdd(uint64_t a) {
  uint64_t x = a;  // Newton's iteration: each step doubles the correct low bits.
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= kMul1;
  x ^= x >> 33;
  x *= kMul2;
  x ^= x >> 33;
  return x;
}
inline uint64_t Unmix64(uint64_t x) {
  x ^= x >> 33;
  x *= InverseOdd(kMul2);
  x ^= x >> 33;
  x *= InverseOdd(kMul1);
  x ^= x >> 33;
  return x;
}

struct Spec {
  uint32_t seed = 0;
  uint32_t index = 0;
  uint32_t size = 0;
};

inline uint32_t CheckWord(const Spec& s) {
  uint64_t st = (uint64_t{s.seed} << 32) ^ s.index ^ (uint64_t{s.size} * 0x100000001b3ull);
  return static_cast<uint32_t>(SplitMix64(st) >> 11);
}

inline std::string KeyOf(const Spec& s) {
  const uint64_t hi = Mix64((uint64_t{s.seed} << 32) | s.index);
  const uint64_t lo = Mix64((uint64_t{s.size} << 32) | CheckWord(s));
  char buf[64];
  std::snprintf(buf, sizeof buf, "v1-%016" PRIx64 "%016" PRIx64, hi, lo);
  return buf;
}

// The spec a key was made from, or nullopt for a key this generator never makes.
inline std::optional<Spec> Decode(std::string_view key) {
  if (key.size() != 35 || key.substr(0, 3) != "v1-") return std::nullopt;
  for (char c : key.substr(3)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  const uint64_t hi = Unmix64(std::strtoull(std::string(key.substr(3, 16)).c_str(), nullptr, 16));
  const uint64_t lo = Unmix64(std::strtoull(std::string(key.substr(19, 16)).c_str(), nullptr, 16));
  Spec s{static_cast<uint32_t>(hi >> 32), static_cast<uint32_t>(hi),
         static_cast<uint32_t>(lo >> 32)};
  if (static_cast<uint32_t>(lo) != CheckWord(s)) return std::nullopt;
  return s;
}

inline std::string Marker(std::string_view key, size_t offset) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%.*s%.*s @%08zx>>", static_cast<int>(kMarkerPrefix.size()),
                kMarkerPrefix.data(), static_cast<int>(key.size()), key.data(), offset);
  return buf;
}

// The artifact's bytes: pseudo-random (incompressible), with a marker every 4 KiB.
inline std::string Content(const Spec& s) {
  const std::string key = KeyOf(s);
  std::string out(s.size, '\0');
  uint64_t st = Mix64((uint64_t{s.seed} << 32) | s.index) ^ 0x5bd1e9955bd1e995ull;
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t v = SplitMix64(st);
    std::memcpy(&out[i], &v, 8);
  }
  if (i < out.size()) {
    const uint64_t v = SplitMix64(st);
    std::memcpy(&out[i], &v, out.size() - i);
  }
  for (size_t off = 0; off + kMarkerLength <= out.size(); off += kMarkerEvery) {
    const std::string m = Marker(key, off);
    std::memcpy(&out[off], m.data(), m.size());
  }
  return out;
}

// The size of the child's artifact number `index`: mostly small single-record ones, a good share
// of multi-chunk ones, and now and then one on a chunk boundary.
inline uint32_t SizeFor(uint32_t seed, uint32_t index) {
  uint64_t st = (uint64_t{seed} << 32) ^ (uint64_t{index} * 0x9e3779b97f4a7c15ull) ^ 0x1234567ull;
  const uint64_t r = SplitMix64(st);
  const uint64_t r2 = SplitMix64(st);
  const uint32_t pick = static_cast<uint32_t>(r % 20);
  if (pick == 0) {
    static constexpr uint32_t kEdges[] = {
        1, kChunkBytes - 1, kChunkBytes, kChunkBytes + 1, 2 * kChunkBytes, 2 * kChunkBytes + 1};
    return kEdges[r2 % (sizeof kEdges / sizeof kEdges[0])];
  }
  if (pick <= 11) return 200 + static_cast<uint32_t>(r2 % (kChunkBytes - 200 + 1));
  return (100u << 10) + static_cast<uint32_t>(r2 % ((500u << 10) + 1));
}

inline hlocache::cache::StoreOptions ChildStoreOptions() {
  hlocache::cache::StoreOptions o;
  o.max_bytes = 0;
  o.min_free_bytes = 0;
  o.chunk_bytes = kChunkBytes;
  o.block_cache_bytes = 8u << 20;
  return o;
}

}  // namespace crash_artifact

#ifndef HLOCACHE_CRASH_CHILD_NO_MAIN

namespace {

namespace fs = std::filesystem;
using hlocache::cache::ArtifactInfo;
using hlocache::cache::PutOutcome;
using hlocache::cache::Store;

int OpenLog(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "store_crash_child: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(5);
  }
  return fd;
}

void WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    std::fprintf(stderr, "store_crash_child: log write failed: %s\n", std::strerror(errno));
    std::exit(5);
  }
}

// Complete lines of a log (a torn last line, cut by SIGKILL, is dropped).
std::vector<std::string> ReadLines(const fs::path& path) {
  std::vector<std::string> lines;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return lines;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string s(line);
    if (s.empty() || s.back() != '\n') break;
    s.pop_back();
    lines.push_back(std::move(s));
  }
  std::fclose(f);
  return lines;
}

// Keys committed (by any earlier run too) and never since picked for an erase: the pool erases
// draw from. (A key whose erase was cut short by SIGKILL may be gone, so it is left alone.)
std::vector<std::string> LivePool(const fs::path& parent) {
  std::vector<std::string> live;
  for (const std::string& s : ReadLines(parent / "committed.log")) {
    if (crash_artifact::Decode(s)) live.push_back(s);
  }
  for (const std::string& s : ReadLines(parent / "attempts.log")) {
    if (s.rfind("erase ", 0) == 0) std::erase(live, s.substr(6));
  }
  return live;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_crash_child DIR SEED\n");
    return 1;
  }
  const fs::path dir = argv[1];
  const uint32_t seed = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const fs::path parent = fs::absolute(dir).parent_path();
  const int attempts = OpenLog(parent / "attempts.log");
  const int committed = OpenLog(parent / "committed.log");

  hlocache::cache::StoreOptions options = crash_artifact::ChildStoreOptions();
  options.log = [](std::string_view line) {
    std::fprintf(stderr, "[child %d] %.*s\n", static_cast<int>(::getpid()),
                 static_cast<int>(line.size()), line.data());
  };
  auto store = Store::Open(dir, options);
  if (!store) {
    std::fprintf(stderr, "store_crash_child: Open(%s) failed: %s\n", dir.c_str(),
                 store.error().ToString().c_str());
    return 2;
  }
  WriteLine(attempts, "opened " + std::to_string(::getpid()));

  std::vector<std::string> pool = LivePool(parent);
  uint64_t rng = (uint64_t{seed} << 20) ^ 0xabcdef12345ull;
  const ArtifactInfo info{"cpu-x86-64-v3", "crash-child/1", "crash_graph", 1.5};

  for (uint32_t i = 0;; ++i) {
    // Now and then erase an earlier key; past kLiveCap live keys, two per put.
    const int erases = pool.size() > crash_artifact::kLiveCap       ? 2
                       : crash_artifact::SplitMix64(rng) % 100 < 10 ? 1
                                                                    : 0;
    for (int e = 0; e < erases && !pool.empty(); ++e) {
      const size_t j = crash_artifact::SplitMix64(rng) % pool.size();
      const std::string victim = pool[j];
      WriteLine(attempts, "erase " + victim);
      auto erased = (*store)->Erase(victim);
      if (!erased) {
        std::fprintf(stderr, "store_crash_child: Erase(%s) failed: %s\n", victim.c_str(),
                     erased.error().ToString().c_str());
        return 3;
      }
      if (!*erased) {
        std::fprintf(stderr, "store_crash_child: Erase(%s) says the committed key was absent\n",
                     victim.c_str());
        return 3;
      }
      WriteLine(committed, "erased " + victim);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(j));
    }

    const crash_artifact::Spec spec{seed, i, crash_artifact::SizeFor(seed, i)};
    const std::string key = crash_artifact::KeyOf(spec);
    const std::string bytes = crash_artifact::Content(spec);
    WriteLine(attempts, "put " + key);
    hlocache::Result<PutOutcome> outcome = hlocache::Error(hlocache::Internal("unset"));
    if (i % 3 == 1) {
      // The streamed path, in uneven pieces (some larger than a chunk).
      auto writer = (*store)->StartPut(key, info);
      if (!writer) {
        outcome = hlocache::Error(writer.error());
      } else {
        size_t at = 0;
        hlocache::Status st;
        while (at < bytes.size() && st.ok()) {
          const size_t piece =
              1 + crash_artifact::SplitMix64(rng) % (crash_artifact::kChunkBytes * 5 / 2);
          const size_t n = std::min(piece, bytes.size() - at);
          st = (*writer)->Append(std::string_view(bytes).substr(at, n));
          at += n;
        }
        outcome = st.ok() ? (*writer)->Commit() : hlocache::Result<PutOutcome>(hlocache::Error(st));
      }
    } else {
      outcome = (*store)->Put(key, bytes, info);
    }
    if (!outcome) {
      std::fprintf(stderr, "store_crash_child: put #%u of %s (%u bytes) failed: %s\n", i,
                   key.c_str(), spec.size, outcome.error().ToString().c_str());
      return 4;
    }
    WriteLine(committed, key);
    pool.push_back(key);
  }
}

#endif  // HLOCACHE_CRASH_CHILD_NO_MAIN
