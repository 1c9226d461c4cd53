// The memory tier: sealed bodies, what it admits, least-recently-used eviction within the
// budget, and bodies that outlive their place in it; and the file-backed bytes a connection
// sends from the file's pages (splice).
#include "server/memory_tier.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "server/connection.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::server {
namespace {

constexpr uint64_t kKiB = 1024;

std::string Bytes(size_t size, char seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(seed + i * 31 + (i >> 9));
  return bytes;
}

cache::Hash128 ChecksumOf(const std::string& bytes) { return cache::HashBytes(bytes); }

// A sealed body of `bytes` under `key`, appended in pieces of `piece` bytes.
std::shared_ptr<const MemoryBody> Fill(MemoryTier& tier, const std::string& key,
                                       const std::string& bytes, size_t piece = 7000) {
  auto filler = tier.StartFilling(key, bytes.size(), ChecksumOf(bytes));
  EXPECT_NE(filler, nullptr);
  if (!filler) return nullptr;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    EXPECT_THAT(filler->Append(
                    std::span<const char>(bytes).subspan(at, std::min(piece, bytes.size() - at))),
                IsOk());
  }
  auto sealed = filler->Seal();
  EXPECT_THAT(sealed, IsOk());
  return sealed ? *sealed : nullptr;
}

std::string TextOf(const MemoryBody& body) {
  return std::string(body.bytes().data(), body.bytes().size());
}

TEST(MemoryTierTest, ABodyHoldsItsBytesInAFileNothingCanChange) {
  MemoryTier tier(4 << 20);
  const std::string bytes = Bytes(100 * kKiB + 3, 'a');
  auto body = Fill(tier, "k", bytes);
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->key(), "k");
  EXPECT_EQ(body->checksum(), ChecksumOf(bytes));
  EXPECT_TRUE(TextOf(*body) == bytes);
  std::string from_file(bytes.size(), '\0');
  ASSERT_EQ(::pread(body->fd(), from_file.data(), from_file.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(from_file == bytes);
  // Sealed: neither written, nor cut, nor grown, by this process or one it hands the file to.
  EXPECT_EQ(::pwrite(body->fd(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(body->fd(), 10), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(body->fd(), static_cast<off_t>(bytes.size()) + 1), -1);
  EXPECT_EQ(errno, EPERM);
  const int seals = ::fcntl(body->fd(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

TEST(MemoryTierTest, AdmitsBodiesFrom64KiBToAQuarterOfItsBudget) {
  MemoryTier tier(1 << 20);
  EXPECT_FALSE(tier.Admits(64 * kKiB - 1));
  EXPECT_TRUE(tier.Admits(64 * kKiB));
  EXPECT_TRUE(tier.Admits(256 * kKiB));
  EXPECT_FALSE(tier.Admits(256 * kKiB + 1));
  EXPECT_EQ(tier.StartFilling("k", 64 * kKiB - 1, {}), nullptr);
  EXPECT_EQ(tier.StartFilling("k", 256 * kKiB + 1, {}), nullptr);
  EXPECT_NE(tier.StartFilling("k", 256 * kKiB, {}), nullptr);
}

TEST(MemoryTierTest, ABodyIsSealedOnlyWithExactlyItsSize) {
  MemoryTier tier(4 << 20);
  const std::string bytes = Bytes(70 * kKiB, 'b');
  auto short_one = tier.StartFilling("k", bytes.size() + 1, ChecksumOf(bytes));
  ASSERT_NE(short_one, nullptr);
  ASSERT_THAT(short_one->Append(bytes), IsOk());
  EXPECT_THAT(short_one->Seal(), StatusIs(StatusCode::kFailedPrecondition));
  auto long_one = tier.StartFilling("other", bytes.size() - 1, ChecksumOf(bytes));
  ASSERT_NE(long_one, nullptr);
  EXPECT_THAT(long_one->Append(bytes), StatusIs(StatusCode::kFailedPrecondition));
}

TEST(MemoryTierTest, FillsOneBodyPerKeyAtATimeAndNoMoreBytesThanItsBudget) {
  MemoryTier tier(1 << 20);
  auto first = tier.StartFilling("k", 200 * kKiB, {});
  ASSERT_NE(first, nullptr);
  // Many requests for one key while its first copy is being made: no second copy.
  EXPECT_EQ(tier.StartFilling("k", 200 * kKiB, {}), nullptr);
  std::vector<std::unique_ptr<MemoryBodyFiller>> others;
  for (const char* key : {"a", "b", "c"}) {
    others.push_back(tier.StartFilling(key, 240 * kKiB, {}));
    EXPECT_NE(others.back(), nullptr) << key;
  }
  EXPECT_EQ(tier.filling(), 4u);
  // 200 + 3 x 240 KiB are being filled: 105 KiB more would pass the 1 MiB budget, 104 would not.
  EXPECT_EQ(tier.StartFilling("d", 105 * kKiB, {}), nullptr);
  EXPECT_NE(tier.StartFilling("e", 104 * kKiB, {}), nullptr);
  // A filler that ends, sealed or not, lets its key and its bytes be filled again.
  first.reset();
  others.clear();
  EXPECT_EQ(tier.filling(), 0u);
  EXPECT_NE(Fill(tier, "k", Bytes(200 * kKiB, 'k')), nullptr);
  EXPECT_NE(tier.StartFilling("d", 256 * kKiB, {}), nullptr);
  EXPECT_EQ(tier.filling(), 0u);
}

TEST(MemoryTierTest, DropsTheLeastRecentlyUsedBodiesPastItsBudget) {
  MemoryTier tier(1 << 20);
  for (char name : {'a', 'b', 'c', 'd'}) {
    tier.Insert(Fill(tier, std::string(1, name), Bytes(256 * kKiB, name)));
  }
  EXPECT_EQ(tier.size(), 4u);
  EXPECT_EQ(tier.bytes(), uint64_t{1} << 20);
  ASSERT_NE(tier.Find("a"), nullptr);  // Now the most recently used: "b" is the least.
  tier.Insert(Fill(tier, "e", Bytes(200 * kKiB, 'e')));
  EXPECT_EQ(tier.Find("b"), nullptr);
  for (const char* kept : {"a", "c", "d", "e"}) EXPECT_NE(tier.Find(kept), nullptr) << kept;
  EXPECT_EQ(tier.bytes(), 3 * 256 * kKiB + 200 * kKiB);
  EXPECT_LE(tier.bytes(), uint64_t{1} << 20);
  // Stats (what /v1/stats and /metrics report) says the same at one moment.
  const MemoryTierStats stats = tier.Stats();
  EXPECT_EQ(stats.bytes, 3 * 256 * kKiB + 200 * kKiB);
  EXPECT_EQ(stats.bodies, 4u);
  EXPECT_EQ(stats.capacity_bytes, uint64_t{1} << 20);
  // Each later one takes what it needs, least recently found first: "a", then "c".
  tier.Insert(Fill(tier, "f", Bytes(256 * kKiB, 'f')));
  tier.Insert(Fill(tier, "g", Bytes(256 * kKiB, 'g')));
  EXPECT_EQ(tier.Find("a"), nullptr);
  EXPECT_EQ(tier.Find("c"), nullptr);
  EXPECT_LE(tier.bytes(), uint64_t{1} << 20);
  EXPECT_TRUE(TextOf(*tier.Find("g")) == Bytes(256 * kKiB, 'g'));
}

TEST(MemoryTierTest, KeepsNoMoreBodiesThanItsCountWhateverTheirBytes) {
  MemoryTier tier(64 << 20, /*most_bodies=*/3);
  for (char name : {'a', 'b', 'c', 'd', 'e'}) {
    tier.Insert(Fill(tier, std::string(1, name), Bytes(64 * kKiB, name)));
    EXPECT_LE(tier.size(), 3u) << name;
  }
  for (const char* gone : {"a", "b"}) EXPECT_EQ(tier.Find(gone), nullptr) << gone;
  for (const char* kept : {"c", "d", "e"}) EXPECT_NE(tier.Find(kept), nullptr) << kept;
  EXPECT_EQ(tier.bytes(), 3 * 64 * kKiB);
}

TEST(MemoryTierTest, ABodyInUseOutlivesItsEviction) {
  MemoryTier tier(1 << 20);
  const std::string bytes = Bytes(256 * kKiB, 'h');
  tier.Insert(Fill(tier, "held", bytes));
  std::shared_ptr<const MemoryBody> held = tier.Find("held");
  ASSERT_NE(held, nullptr);
  for (char name : {'1', '2', '3', '4'}) {
    tier.Insert(Fill(tier, std::string(1, name), Bytes(256 * kKiB, name)));
  }
  EXPECT_EQ(tier.Find("held"), nullptr);
  EXPECT_TRUE(TextOf(*held) == bytes);
  std::string from_file(bytes.size(), '\0');
  EXPECT_EQ(::pread(held->fd(), from_file.data(), from_file.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(from_file == bytes);
}

TEST(MemoryTierTest, ErasingAStaleBodyLeavesTheOneThatReplacedIt) {
  MemoryTier tier(4 << 20);
  auto old_body = Fill(tier, "k", Bytes(80 * kKiB, 'o'));
  auto new_body = Fill(tier, "k", Bytes(90 * kKiB, 'n'));
  tier.Insert(old_body);
  tier.Insert(new_body);
  EXPECT_EQ(tier.size(), 1u);
  EXPECT_EQ(tier.bytes(), 90 * kKiB);
  tier.Erase("k", old_body.get());
  EXPECT_EQ(tier.Find("k"), new_body);
  tier.Erase("k", new_body.get());
  EXPECT_EQ(tier.Find("k"), nullptr);
  EXPECT_EQ(tier.bytes(), 0u);
  tier.Insert(old_body);
  tier.Erase("k");
  EXPECT_EQ(tier.size(), 0u);
}

TEST(FileBackedBytesTest, NamesTheFileOffsetOfBytesWithinTheInnermostScopeOnly) {
  const std::string outer_bytes(1000, 'o'), inner_bytes(500, 'i');
  int fd = -1;
  EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data(), 10, fd), -1);
  {
    FileBackedBytes outer(outer_bytes, 7);
    EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data() + 100, 900, fd), 100);
    EXPECT_EQ(fd, 7);
    EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data() + 100, 901, fd), -1);
    EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data() - 1, 2, fd), -1);
    EXPECT_EQ(FileBackedBytes::OffsetOf(inner_bytes.data(), 1, fd), -1);
    {
      FileBackedBytes inner(inner_bytes, 9);
      EXPECT_EQ(FileBackedBytes::OffsetOf(inner_bytes.data() + 499, 1, fd), 499);
      EXPECT_EQ(fd, 9);
      EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data(), 1, fd), -1);
    }
    EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data(), 1000, fd), 0);
    EXPECT_EQ(fd, 7);
  }
  EXPECT_EQ(FileBackedBytes::OffsetOf(outer_bytes.data(), 10, fd), -1);
}

}  // namespace
}  // namespace hlocache::server
