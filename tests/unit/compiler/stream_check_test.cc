// The streaming container check agrees with DecodeArtifact on every prefix split, every
// corruption and every truncation.
#include "compiler/artifact/stream_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "compiler/artifact/container.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using ::testing::HasSubstr;

std::string Sample(size_t payload_bytes) {
  ArtifactHeader h;
  h.key = "v1-0123456789abcdef0123456789abcdef";
  h.target = "cpu-x86-64-v3";
  h.compiler_id = "gcc-12.2.0/hlocache-codegen-3/O2";
  h.payload_kind = std::string(kPayloadSharedObject);
  h.entry_symbol = "hlocache_entry";
  h.parameter_shapes = {"f32[2]"};
  h.result_shape = "f32[2]";
  h.compile_seconds = 0.25;
  std::string payload(payload_bytes, 'p');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + 7);
  return EncodeArtifact(h, payload);
}

// Feeds `bytes` in pieces cut at random points; the outcome of Finish (or the first Feed error).
Status Check(std::string_view bytes, uint64_t seed, ArtifactHeader* header = nullptr) {
  ArtifactStreamChecker checker;
  std::mt19937_64 rng(seed);
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1 + rng() % 97);
    if (Status s = checker.Feed(bytes.substr(0, n)); !s.ok()) return s;
    bytes.remove_prefix(n);
  }
  auto h = checker.Finish();
  if (!h) return h.error();
  if (header) *header = *h;
  return Status::Ok();
}

TEST(ArtifactStreamCheckerTest, AcceptsWhatDecodeAcceptsWhateverTheSplits) {
  for (size_t payload : {size_t{0}, size_t{1}, size_t{1000}, size_t{70000}}) {
    const std::string bytes = Sample(payload);
    for (uint64_t seed = 0; seed < 5; ++seed) {
      ArtifactHeader header;
      ASSERT_THAT(Check(bytes, seed, &header), IsOk()) << payload;
      EXPECT_EQ(header.key, "v1-0123456789abcdef0123456789abcdef");
      EXPECT_EQ(header.compile_seconds, 0.25);
    }
    EXPECT_EQ(PeekCompileSeconds(bytes), 0.25);
    auto peeked = PeekArtifactHeader(bytes.substr(0, 600));
    ASSERT_THAT(peeked, IsOk());
    EXPECT_EQ(peeked->target, "cpu-x86-64-v3");
  }
}

TEST(ArtifactStreamCheckerTest, RejectsEveryFlippedByteLikeDecode) {
  const std::string good = Sample(300);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x40;
    const Status streamed = Check(bad, i);
    const bool decoded = static_cast<bool>(DecodeArtifact(bad));
    EXPECT_FALSE(streamed.ok()) << "byte " << i;
    EXPECT_FALSE(decoded) << "byte " << i;
  }
}

TEST(ArtifactStreamCheckerTest, RejectsTruncationsAndTrailingBytes) {
  const std::string good = Sample(500);
  for (size_t cut = 0; cut < good.size(); cut += 7) {
    EXPECT_FALSE(Check(good.substr(0, cut), cut).ok()) << "cut at " << cut;
  }
  EXPECT_THAT(Check(good + "x", 1), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(Check("definitely not an artifact at all", 1),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(Check("", 1), StatusIs(StatusCode::kInvalidArgument));
}

// The spec's first check: under 40 bytes nothing is an artifact, even after a whole valid
// prefix (magic, version, a short header's length). The checker said "truncated" there while
// DecodeArtifact said "not an artifact"; artifact_fuzz holds the two to the same codes.
TEST(ArtifactStreamCheckerTest, UnderFortyBytesIsNotAnArtifactAsDecodeSays) {
  const std::string good = EncodeArtifactWithRawHeader("{}", "");
  ASSERT_EQ(good.size(), 42u);
  for (size_t cut = 8; cut < 40; ++cut) {
    const std::string prefix = good.substr(0, cut);
    EXPECT_THAT(Check(prefix, cut), StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an")))
        << "cut at " << cut;
    EXPECT_THAT(DecodeArtifact(prefix), StatusIs(StatusCode::kInvalidArgument)) << "cut at " << cut;
  }
  EXPECT_THAT(Check(good.substr(0, 41), 1),
              StatusIs(StatusCode::kDataLoss, HasSubstr("truncated")));
}

}  // namespace
}  // namespace hlocache::compiler
