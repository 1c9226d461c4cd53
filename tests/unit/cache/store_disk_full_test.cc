// cache::Store on a really full disk: each test mounts its own 24 MiB tmpfs (so it needs root and
// a kernel that allows the mount; otherwise it is skipped) and fills it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "tests/unit/status_matchers.h"

extern char** environ;

namespace hlocache::cache {
namespace {

namespace fs = std::filesystem;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Artifact {
  std::string key;
  std::string bytes;
};

// Distinct, incompressible artifacts: number `i` of family `tag`.
Artifact MakeArtifact(uint64_t tag, uint64_t i, size_t size) {
  uint64_t st = (tag << 40) ^ (i * 0x9e3779b97f4a7c15ull) ^ 0x7f4a7c15ull;
  char key[64];
  const uint64_t hi = SplitMix64(st);
  const uint64_t lo = SplitMix64(st);
  std::snprintf(key, sizeof key, "v1-%016" PRIx64 "%016" PRIx64, hi, lo);
  std::string bytes(size, '\0');
  for (size_t at = 0; at < size; at += 8) {
    const uint64_t v = SplitMix64(st);
    std::memcpy(&bytes[at], &v, std::min<size_t>(8, size - at));
  }
  return Artifact{key, std::move(bytes)};
}

int RunCommand(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

uint64_t FreeBytes(const fs::path& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

ArtifactInfo Info() { return ArtifactInfo{"cpu-x86-64-v3", "disk-full-test/1", "full_graph", 0.1}; }

bool MentionsSpace(const Status& s) {
  std::string m = s.message();
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  return m.find("space") != std::string::npos;
}

class StoreDiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "mounting a tmpfs needs root; skipping the disk-full test";
    std::string tmpl = (fs::path(::testing::TempDir()) / "hlocache-diskfull-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    mount_point_ = tmpl;
    if (RunCommand({"mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs",
                    mount_point_.string()}) != 0) {
      std::error_code ec;
      fs::remove(mount_point_, ec);
      mount_point_.clear();
      GTEST_SKIP() << "cannot mount a 24 MiB tmpfs (`mount -t tmpfs` failed: no CAP_SYS_ADMIN, "
                      "or the kernel refuses); skipping the disk-full test";
    }
    mounted_ = true;
    struct statvfs st {};
    ASSERT_EQ(::statvfs(mount_point_.c_str(), &st), 0);
    const uint64_t total = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
    ASSERT_GE(total, 20 * kMiB);
    ASSERT_LE(total, 28 * kMiB) << mount_point_ << " is not the small tmpfs";
    dir_ = mount_point_ / "store";
    filler_ = mount_point_ / "filler";
  }

  void TearDown() override {
    store_.reset();  // Before the unmount.
    if (mounted_ && RunCommand({"umount", mount_point_}) != 0) {
      ADD_FAILURE() << "umount " << mount_point_ << " failed; trying umount -l";
      RunCommand({"umount", "-l", mount_point_});
    }
    if (!mount_point_.empty()) {
      std::error_code ec;
      fs::remove(mount_point_, ec);
    }
  }

  // A file of our own outside the store, deleted later to give the store room to reopen.
  void WriteFiller(uint64_t bytes) {
    std::ofstream out(filler_, std::ios::binary);
    const std::string block(kMiB, 'f');
    for (uint64_t n = 0; n < bytes; n += kMiB) out.write(block.data(), block.size());
    out.close();
    ASSERT_TRUE(out.good()) << "writing " << filler_;
  }

  StoreOptions Options(uint64_t min_free, uint32_t chunk) {
    StoreOptions o;
    o.min_free_bytes = min_free;
    o.chunk_bytes = chunk;
    o.max_bytes = 0;
    o.block_cache_bytes = 1 * kMiB;
    o.log = [](std::string_view line) {
      std::fprintf(stderr, "[store] %.*s\n", static_cast<int>(line.size()), line.data());
    };
    return o;
  }

  void OpenStore(const StoreOptions& options) {
    store_.reset();
    auto opened = Store::Open(dir_, options);
    ASSERT_THAT(opened, IsOk()) << "opening the store on " << dir_ << " with "
                                << FreeBytes(mount_point_) << " bytes free";
    store_ = std::move(*opened);
  }

  // Closes and reopens the store after the disk filled up. Should Open itself run out of space,
  // that is a failure, but the tmpfs is then grown to 128 MiB and the open retried, so that the
  // rest of the test still checks the data.
  void Reopen(const StoreOptions& options) {
    store_.reset();
    const uint64_t free_before = FreeBytes(mount_point_);
    auto opened = Store::Open(dir_, options);
    if (!opened && opened.error().code() == StatusCode::kResourceExhausted) {
      ADD_FAILURE() << "reopening the store after the disk filled up fails with " << free_before
                    << " bytes free (store files: " << DuBytes(dir_) << " bytes:" << Listing(dir_)
                    << "): " << opened.error().ToString() << "\nLevelDB's log:\n"
                    << ReadFile(dir_ / "blobs" / "LOG") << "\nthe one before:\n"
                    << ReadFile(dir_ / "blobs" / "LOG.old")
                    << "\n(growing the tmpfs to 128 MiB and retrying, to check the data anyway)";
      ASSERT_EQ(RunCommand({"mount", "-o", "remount,size=128m", "tmpfs", mount_point_.string()}),
                0);
      opened = Store::Open(dir_, options);
    }
    ASSERT_THAT(opened, IsOk()) << "reopening the store on " << dir_ << " with "
                                << FreeBytes(mount_point_) << " bytes free";
    store_ = std::move(*opened);
  }

  static std::string ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  static std::string Listing(const fs::path& dir) {
    std::string out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_regular_file(ec)) {
        out += " " + it->path().filename().string() + "=" + std::to_string(it->file_size(ec));
      }
    }
    return out;
  }

  static uint64_t DuBytes(const fs::path& dir) {
    uint64_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    return total;
  }

  void ExpectExact(const Artifact& a) {
    auto got = store_->Get(a.key);
    ASSERT_THAT(got, IsOk()) << "Get(" << a.key << ")";
    ASSERT_TRUE(got->has_value()) << a.key << " (" << a.bytes.size() << " bytes) misses";
    EXPECT_TRUE(got->value() == a.bytes) << a.key << " reads back wrong";
  }

  void ExpectAbsent(const Artifact& a) {
    auto contains = store_->Contains(a.key);
    ASSERT_THAT(contains, IsOk());
    EXPECT_FALSE(*contains) << a.key;
    auto got = store_->Get(a.key);
    ASSERT_THAT(got, IsOk());
    EXPECT_FALSE(got->has_value()) << a.key;
  }

  // A key whose put failed: absent, or (had the bytes landed after all) intact; never wrong.
  void ExpectAbsentOrExact(const Artifact& a, bool* present) {
    auto got = store_->Get(a.key);
    ASSERT_THAT(got, IsOk());
    *present = got->has_value();
    if (*present) {
      EXPECT_TRUE(got->value() == a.bytes) << a.key << " reads back wrong";
    }
    auto contains = store_->Contains(a.key);
    ASSERT_THAT(contains, IsOk());
    EXPECT_EQ(*contains, *present) << a.key;
  }

  // Stats and List agree with exactly `expected`.
  void ExpectCatalog(const std::vector<Artifact>& expected) {
    std::vector<std::string> keys;
    uint64_t bytes = 0;
    for (const Artifact& a : expected) {
      keys.push_back(a.key);
      bytes += a.bytes.size();
    }
    auto listed = store_->List(ListFilter{});
    ASSERT_THAT(listed, IsOk());
    std::vector<std::string> listed_keys;
    uint64_t listed_bytes = 0;
    for (const EntryInfo& e : *listed) {
      listed_keys.push_back(e.key);
      listed_bytes += e.size;
    }
    EXPECT_THAT(listed_keys, UnorderedElementsAreArray(keys));
    EXPECT_EQ(listed_bytes, bytes);
    auto stats = store_->Stats();
    ASSERT_THAT(stats, IsOk());
    EXPECT_EQ(stats->entries, expected.size());
    EXPECT_EQ(stats->bytes, bytes);
  }

  // Puts artifacts of `size` from family `tag` until a put fails; returns the failure.
  Status FillUntilRefused(uint64_t tag, size_t size, size_t max_puts, std::vector<Artifact>& stored,
                          Artifact* refused) {
    const ArtifactInfo info = Info();
    for (size_t i = 0; i < max_puts; ++i) {
      Artifact a = MakeArtifact(tag, i, size);
      auto outcome = store_->Put(a.key, a.bytes, info);
      if (!outcome) {
        *refused = std::move(a);
        return outcome.error();
      }
      EXPECT_EQ(*outcome, PutOutcome::kStored);
      stored.push_back(std::move(a));
    }
    return Status::Ok();
  }

  fs::path mount_point_;
  bool mounted_ = false;
  fs::path dir_;
  fs::path filler_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreDiskFullTest, PutOnFullDiskFailsCleanlyWithResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(WriteFiller(6 * kMiB));
  ASSERT_NO_FATAL_FAILURE(OpenStore(Options(/*min_free=*/0, /*chunk=*/1 * kMiB)));
  std::vector<Artifact> stored;
  Artifact refused;
  const Status failure = FillUntilRefused(1, 512 * kKiB, 200, stored, &refused);
  ASSERT_FALSE(failure.ok()) << "200 puts of 512 KiB all succeeded on a 24 MiB filesystem";
  std::printf("%zu puts of 512 KiB stored, then: %s (%" PRIu64 " bytes free)\n", stored.size(),
              failure.ToString().c_str(), FreeBytes(mount_point_));
  EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted) << failure.ToString();
  EXPECT_TRUE(MentionsSpace(failure))
      << "the message should say the disk is out of space: " << failure.ToString();
  EXPECT_GE(stored.size(), 8u) << "the store gave up long before the disk was full";

  // Everything acknowledged still reads back; the failed put left nothing wrong behind.
  for (const Artifact& a : stored) ExpectExact(a);
  bool refused_present = false;
  ExpectAbsentOrExact(refused, &refused_present);
  EXPECT_FALSE(refused_present) << "a put that reported failure is visible";
  ExpectCatalog(stored);

  // A second attempt fails the same way, unless LevelDB's background compaction freed room in
  // the meantime: then it must have stored the artifact intact. Reads work either way.
  auto retry = store_->Put(refused.key, refused.bytes, Info());
  if (retry.has_value()) {
    ExpectExact(refused);
  } else {
    EXPECT_THAT(retry.error(), StatusIs(StatusCode::kResourceExhausted));
  }
  ExpectExact(stored.front());

  // Give back our own filler, then close and reopen: everything is still there.
  ASSERT_TRUE(fs::remove(filler_));
  ASSERT_NO_FATAL_FAILURE(Reopen(Options(0, 1 * kMiB)));
  for (const Artifact& a : stored) ExpectExact(a);
  ExpectAbsentOrExact(refused, &refused_present);
  std::vector<Artifact> expected = stored;
  if (refused_present) expected.push_back(refused);
  ExpectCatalog(expected);
  auto report = store_->VerifyAll();
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->corrupt, IsEmpty());
  EXPECT_EQ(report->checked, expected.size());

  // With the filler's room back, a small put works again.
  const Artifact small = MakeArtifact(2, 0, 4 * kKiB);
  EXPECT_THAT(store_->Put(small.key, small.bytes, Info()), IsOk())
      << FreeBytes(mount_point_) << " bytes free";
}

TEST_F(StoreDiskFullTest, MinFreeBytesRefusesPutsBeforeTheDiskIsFull) {
  constexpr uint64_t kMinFree = 8 * kMiB;
  ASSERT_NO_FATAL_FAILURE(OpenStore(Options(kMinFree, 1 * kMiB)));
  std::vector<Artifact> large;
  Artifact refused_large;
  const Status large_failure = FillUntilRefused(3, 512 * kKiB, 200, large, &refused_large);
  const uint64_t free_at_refusal = FreeBytes(mount_point_);
  ASSERT_FALSE(large_failure.ok()) << "200 puts of 512 KiB all succeeded on a 24 MiB filesystem";
  std::printf("%zu puts of 512 KiB stored, then: %s (%" PRIu64 " bytes free)\n", large.size(),
              large_failure.ToString().c_str(), free_at_refusal);
  EXPECT_EQ(large_failure.code(), StatusCode::kResourceExhausted) << large_failure.ToString();
  EXPECT_TRUE(MentionsSpace(large_failure)) << large_failure.ToString();
  EXPECT_GE(large.size(), 4u) << "refused long before the reserve was reached";
  EXPECT_GE(free_at_refusal, kMinFree / 2)
      << "the put was refused only when the disk was (nearly) full, not at min_free_bytes";

  // Small puts fill what is left above the reserve, then are refused too.
  std::vector<Artifact> small;
  Artifact refused_small;
  const Status small_failure = FillUntilRefused(4, 16 * kKiB, 2000, small, &refused_small);
  ASSERT_FALSE(small_failure.ok()) << "2000 puts of 16 KiB all succeeded";
  std::printf("then %zu puts of 16 KiB, then: %s (%" PRIu64 " bytes free)\n", small.size(),
              small_failure.ToString().c_str(), FreeBytes(mount_point_));
  EXPECT_EQ(small_failure.code(), StatusCode::kResourceExhausted) << small_failure.ToString();
  EXPECT_GE(FreeBytes(mount_point_), kMinFree / 2) << "the reserve was eaten by small puts";

  // Reads still work, and the refused keys are absent.
  for (const Artifact& a : large) ExpectExact(a);
  for (const Artifact& a : small) ExpectExact(a);
  ExpectAbsent(refused_large);
  ExpectAbsent(refused_small);
  std::vector<Artifact> all = large;
  all.insert(all.end(), small.begin(), small.end());
  ExpectCatalog(all);

  // Erasing works at the reserve. LevelDB returns an erased value's space only when a later
  // compaction drops it, so the next put may still be refused, but only for space.
  const size_t erase_count = (large.size() + 1) / 2;
  for (size_t i = 0; i < erase_count; ++i) {
    auto erased = store_->Erase(large[i].key);
    ASSERT_THAT(erased, IsOk()) << "Erase on a store at its reserve";
    EXPECT_TRUE(*erased);
  }
  std::printf("erased %zu x 512 KiB: %" PRIu64 " bytes free\n", erase_count,
              FreeBytes(mount_point_));
  const Artifact fresh = MakeArtifact(5, 0, 16 * kKiB);
  auto put = store_->Put(fresh.key, fresh.bytes, Info());
  if (!put) {
    EXPECT_THAT(put, StatusIs(StatusCode::kResourceExhausted))
        << "after erasing " << erase_count * 512 << " KiB, " << FreeBytes(mount_point_)
        << " bytes free";
  }

  std::vector<Artifact> kept(large.begin() + static_cast<std::ptrdiff_t>(erase_count), large.end());
  kept.insert(kept.end(), small.begin(), small.end());
  if (put) kept.push_back(fresh);
  for (size_t i = 0; i < erase_count; ++i) ExpectAbsent(large[i]);
  for (const Artifact& a : kept) ExpectExact(a);
  ExpectCatalog(kept);

  // Close and reopen: the same entries, all intact.
  ASSERT_NO_FATAL_FAILURE(Reopen(Options(kMinFree, 1 * kMiB)));
  for (size_t i = 0; i < erase_count; ++i) ExpectAbsent(large[i]);
  for (const Artifact& a : kept) ExpectExact(a);
  ExpectCatalog(kept);
}

TEST_F(StoreDiskFullTest, StreamedPutRunningOutOfSpaceLeavesNothingBehind) {
  ASSERT_NO_FATAL_FAILURE(WriteFiller(6 * kMiB));
  ASSERT_NO_FATAL_FAILURE(OpenStore(Options(/*min_free=*/0, /*chunk=*/256 * kKiB)));
  std::vector<Artifact> stored;
  for (uint64_t i = 0; i < 3; ++i) stored.push_back(MakeArtifact(6, i, 300 * kKiB));
  for (const Artifact& a : stored) {
    ASSERT_THAT(store_->Put(a.key, a.bytes, Info()), IsOk());
  }

  // A 64 MiB artifact streamed into a 24 MiB filesystem: Append or Commit must fail.
  const Artifact piece = MakeArtifact(7, 0, 256 * kKiB);
  const std::string big_key = MakeArtifact(7, 1, 1).key;
  Status failure;
  size_t appended = 0;
  {
    auto writer = store_->StartPut(big_key, Info());
    ASSERT_THAT(writer, IsOk());
    for (int i = 0; i < 256 && failure.ok(); ++i) {
      failure = (*writer)->Append(piece.bytes);
      if (failure.ok()) appended += piece.bytes.size();
    }
    if (failure.ok()) {
      auto commit = (*writer)->Commit();
      ASSERT_FALSE(commit.has_value()) << "a 64 MiB artifact committed on a 24 MiB filesystem";
      failure = commit.error();
    }
  }  // The writer is destroyed uncommitted.
  std::printf("streamed put failed after %zu MiB: %s (%" PRIu64 " bytes free)\n", appended / kMiB,
              failure.ToString().c_str(), FreeBytes(mount_point_));
  EXPECT_EQ(failure.code(), StatusCode::kResourceExhausted) << failure.ToString();
  EXPECT_TRUE(MentionsSpace(failure)) << failure.ToString();

  auto contains = store_->Contains(big_key);
  ASSERT_THAT(contains, IsOk());
  EXPECT_FALSE(*contains);
  auto reader = store_->OpenReader(big_key);
  ASSERT_THAT(reader, IsOk());
  EXPECT_EQ(*reader, nullptr);
  for (const Artifact& a : stored) ExpectExact(a);
  ExpectCatalog(stored);

  // Free our filler, reopen: the half-written put is gone for good.
  ASSERT_TRUE(fs::remove(filler_));
  ASSERT_NO_FATAL_FAILURE(Reopen(Options(0, 256 * kKiB)));
  for (const Artifact& a : stored) ExpectExact(a);
  ExpectCatalog(stored);
  auto report = store_->VerifyAll();
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->corrupt, IsEmpty());
  EXPECT_EQ(report->checked, stored.size());
  EXPECT_EQ(report->orphan_chunks_removed, 0u) << "Open left the aborted put's chunks behind";
  const Artifact small = MakeArtifact(8, 0, 4 * kKiB);
  EXPECT_THAT(store_->Put(small.key, small.bytes, Info()), IsOk())
      << FreeBytes(mount_point_) << " bytes free";
}

}  // namespace
}  // namespace hlocache::cache
