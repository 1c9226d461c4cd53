#include "storage/store_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tests/unit/status_matchers.h"

namespace hlocache::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kKey = "v1-0123456789abcdef0123456789abcdef";

class StoreBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hlocache-storage-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto store = cache::Store::Open(dir_);
    ASSERT_THAT(store, IsOk());
    backend_ = MakeStoreBackend(std::move(*store));
  }
  void TearDown() override {
    backend_.reset();
    fs::remove_all(dir_);
  }
  static std::string Bytes(size_t n) {
    std::mt19937_64 rng(n);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  fs::path dir_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(StoreBackendTest, AMissIsEmptyAndAPutIsReadBackWhole) {
  EXPECT_EQ(backend_->name(), "local " + dir_.string());
  EXPECT_FALSE(backend_->remote());
  auto head = backend_->Head(kKey);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
  auto miss = backend_->Get(kKey);
  ASSERT_THAT(miss, IsOk());
  EXPECT_FALSE(miss->has_value());

  const std::string bytes = Bytes(3 << 20);
  ASSERT_THAT(backend_->Put(kKey, bytes, {}), IsOk());
  head = backend_->Head(kKey);
  ASSERT_THAT(head, IsOk());
  EXPECT_EQ(head->value_or(0), bytes.size());
  auto got = backend_->Get(kKey);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == bytes);
}

TEST_F(StoreBackendTest, AWriteInPiecesIsVisibleOnlyWhenWholeAndASinkMayStopARead) {
  const std::string bytes = Bytes(5 << 20);  // Read back in several chunks.
  size_t at = 0;
  bool failed_midway = false;
  // A source that fails halfway: nothing is left under the key.
  ChunkSource failing = [&]() -> Result<std::string_view> {
    if (at >= bytes.size() / 2) {
      failed_midway = true;
      return Error(DataLoss("the source broke"));
    }
    std::string_view piece = std::string_view(bytes).substr(at, 64 << 10);
    at += piece.size();
    return piece;
  };
  EXPECT_THAT(backend_->Write(kKey, bytes.size(), failing, {}),
              StatusIs(StatusCode::kDataLoss, HasSubstr("the source broke")));
  EXPECT_TRUE(failed_midway);
  auto head = backend_->Head(kKey);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());

  // Fewer bytes than announced: refused, nothing stored.
  at = 0;
  ChunkSource short_source = [&]() -> Result<std::string_view> {
    if (at >= bytes.size() - 10) return std::string_view();
    std::string_view piece =
        std::string_view(bytes).substr(at, std::min<size_t>(64 << 10, bytes.size() - 10 - at));
    at += piece.size();
    return piece;
  };
  EXPECT_THAT(backend_->Write(kKey, bytes.size(), short_source, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("announced")));
  head = backend_->Head(kKey);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());

  at = 0;
  ChunkSource pieces = [&]() -> Result<std::string_view> {
    std::string_view piece = std::string_view(bytes).substr(at, 64 << 10);
    at += piece.size();
    return piece;
  };
  ASSERT_THAT(backend_->Write(kKey, bytes.size(), pieces, {}), IsOk());

  uint64_t announced = 0;
  std::string first;
  ReadSink stop_after_one;
  stop_after_one.start = [&](uint64_t size) {
    announced = size;
    return true;
  };
  stop_after_one.chunk = [&](std::string_view piece) {
    first.assign(piece);
    return false;
  };
  auto read = backend_->Read(kKey, stop_after_one);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(*read);
  EXPECT_EQ(announced, bytes.size());
  EXPECT_FALSE(first.empty());
  EXPECT_LT(first.size(), bytes.size());
  EXPECT_TRUE(bytes.starts_with(first));
}

TEST_F(StoreBackendTest, AStoreCompilesNothing) {
  EXPECT_FALSE(backend_->CanCompile("cpu-x86-64-v2"));
  EXPECT_THAT(backend_->Compile("HloModule m", "cpu-x86-64-v2"),
              StatusIs(StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace hlocache::storage
