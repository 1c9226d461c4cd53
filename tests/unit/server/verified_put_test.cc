// VerifiedPut: an artifact reaches the store only whole and checked, fed in any pieces.
#include "server/verified_put.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/key.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "compiler/artifact/graph_section.h"
#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::server {
namespace {

using ::testing::HasSubstr;
using testing::MakeArtifact;
using testing::TestKey;

class VerifiedPutTest : public testing::TestDirectory {
 protected:
  void SetUp() override {
    TestDirectory::SetUp();
    cache::StoreOptions o;
    o.min_free_bytes = 0;
    o.chunk_bytes = 64 << 10;
    auto store = cache::Store::Open(root_ / "store", o);
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    TestDirectory::TearDown();
  }

  // Feeds `bytes` in pieces of `piece` bytes; the outcome of Finish.
  Result<cache::PutOutcome> Feed(const std::string& key, const std::string& bytes, size_t piece,
                                 uint64_t declared, bool strict = false) {
    VerifiedPut put(*store_, key, declared, strict);
    for (size_t at = 0; at < bytes.size(); at += piece) {
      put.Receive(std::string_view(bytes).substr(at, piece));
    }
    return put.Finish();
  }
  bool Stored(const std::string& key) { return store_->Contains(key).value_or(false); }

  std::unique_ptr<cache::Store> store_;
};

TEST_F(VerifiedPutTest, SmallAndStreamedArtifactsArriveWholeInAnyPieces) {
  for (size_t payload : {size_t{10}, size_t{70000}, (size_t{4} << 20) + 4097}) {
    for (size_t piece : {size_t{1} << 20, size_t{4093}}) {
      const std::string key = TestKey(payload + piece);
      const std::string bytes = MakeArtifact(key, payload, payload);
      auto outcome = Feed(key, bytes, piece, bytes.size());
      ASSERT_THAT(outcome, IsOk()) << payload << " in pieces of " << piece;
      EXPECT_EQ(*outcome, cache::PutOutcome::kStored);
      EXPECT_EQ(store_->Get(key).value().value(), bytes);
      EXPECT_EQ(*Feed(key, bytes, piece, bytes.size()), cache::PutOutcome::kAlreadyPresent);
    }
  }
}

TEST_F(VerifiedPutTest, WhatFailsACheckLeavesNothing) {
  const std::string key = TestKey(1);
  for (size_t payload : {size_t{5000}, (size_t{4} << 20) + 10}) {  // Buffered and streamed.
    std::string corrupt = MakeArtifact(key, payload, 1);
    corrupt[corrupt.size() - 200] ^= 1;
    EXPECT_THAT(Feed(key, corrupt, 65536, corrupt.size()),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad artifact")));
    EXPECT_FALSE(Stored(key));

    const std::string good = MakeArtifact(key, payload, 2);
    EXPECT_THAT(Feed(TestKey(2), good, 65536, good.size()),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("built for key " + key)));
    EXPECT_FALSE(Stored(TestKey(2)));
    EXPECT_THAT(Feed(key, good.substr(0, good.size() - 1), 65536, good.size() - 1),
                StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(Feed(key, good, 65536, good.size() + 7),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("declares")));
    EXPECT_THAT(Feed(key, good + "extra", 65536, good.size() + 5),
                StatusIs(StatusCode::kInvalidArgument));
    EXPECT_FALSE(Stored(key));
  }
  EXPECT_THAT(Feed(key, "not an artifact at all, not even close", 8, 38),
              StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(store_->Stats()->entries, 0u);
}

TEST_F(VerifiedPutTest, AnAbandonedStreamedPutLeavesNothing) {
  const std::string key = TestKey(3);
  const std::string bytes = MakeArtifact(key, size_t{6} << 20, 3);
  {
    VerifiedPut put(*store_, key, bytes.size(), false);
    EXPECT_TRUE(put.Receive(std::string_view(bytes).substr(0, bytes.size() / 2)));
  }  // Destroyed before Finish, as when a client hangs up.
  EXPECT_FALSE(Stored(key));
  EXPECT_THAT(Feed(key, bytes, 1 << 20, bytes.size()), IsOk());
  EXPECT_TRUE(Stored(key));
}

TEST_F(VerifiedPutTest, StrictChecksTheTargetAgainstThePayloadKindAndTheKeyAgainstTheGraph) {
  // An artifact carrying the graph its key was computed from.
  const std::string graph = "HloModule m\n\nENTRY e {\n  ROOT c = f32[] constant(1)\n}\n";
  const std::string bare = MakeArtifact(TestKey(4), 1000, 4);  // A shared object for a CPU target.
  auto base = compiler::DecodeArtifact(bare);
  ASSERT_THAT(base, IsOk());
  compiler::ArtifactHeader with_graph = base->header;
  with_graph.graph_zstd = compiler::EncodeGraph(graph);
  with_graph.key =
      cache::ComposeKey(cache::KeyInput{graph, with_graph.target, with_graph.compiler_id, {}}).text;
  const std::string bytes = compiler::EncodeArtifact(with_graph, base->payload);
  EXPECT_THAT(Feed(with_graph.key, bytes, 100, bytes.size(), /*strict=*/true), IsOk());
  // The same graph under a key it does not give; no graph at all.
  compiler::ArtifactHeader misnamed = with_graph;
  misnamed.key = TestKey(6);
  const std::string misnamed_bytes = compiler::EncodeArtifact(misnamed, base->payload);
  EXPECT_THAT(Feed(misnamed.key, misnamed_bytes, 100, misnamed_bytes.size(), /*strict=*/true),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("key to " + with_graph.key + ", not " + misnamed.key)));
  EXPECT_THAT(Feed(TestKey(4), bare, 100, bare.size(), /*strict=*/true),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("carries no graph")));
  EXPECT_FALSE(Stored(misnamed.key));
  EXPECT_FALSE(Stored(TestKey(4)));

  // A shared object that claims a GPU target passes the container's checks, not strict ones.
  auto decoded = compiler::DecodeArtifact(bytes);
  ASSERT_THAT(decoded, IsOk());
  compiler::ArtifactHeader header = decoded->header;
  header.key = TestKey(5);
  header.target = "cuda-sm_90";
  const std::string mislabeled = compiler::EncodeArtifact(header, decoded->payload);
  EXPECT_THAT(
      Feed(header.key, mislabeled, 100, mislabeled.size(), /*strict=*/true),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("payload kind 'shared-object' does not run on target cuda-sm_90")));
  EXPECT_FALSE(Stored(header.key));
  EXPECT_THAT(Feed(header.key, mislabeled, 100, mislabeled.size(), /*strict=*/false), IsOk());
}

TEST_F(VerifiedPutTest, AFileArtifactIsStoredOnlyUnderTheKeyOfItsNameAndCataloguedByName) {
  const std::string key = cache::ComposeFileKey("jax", "dir/k-cache");
  const std::string file = compiler::EncodeFileArtifact(key, "jax", "dir/k-cache", "payload");
  auto stored = Feed(key, file, 3, file.size());
  ASSERT_THAT(stored, IsOk());
  auto info = store_->Info(key);
  ASSERT_TRUE(info.has_value() && info->has_value());
  EXPECT_EQ((*info)->artifact.target, "file");
  EXPECT_EQ((*info)->artifact.compiler_id, "jax") << "the namespace";
  EXPECT_EQ((*info)->artifact.graph_name, "dir/k-cache") << "the path";
  // A file artifact whose header names another path, under this key: refused, strict or not.
  const std::string other_key = cache::ComposeFileKey("jax", "dir/other");
  const std::string forged = compiler::EncodeFileArtifact(other_key, "jax", "dir/k-cache", "x");
  EXPECT_THAT(Feed(other_key, forged, 1 << 20, forged.size()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("key to")));
  EXPECT_FALSE(Stored(other_key));
  // A name that is not a valid path cannot be stored at all.
  const std::string bad_key = cache::ComposeFileKey("jax", "../escape");
  const std::string bad = compiler::EncodeFileArtifact(bad_key, "jax", "../escape", "x");
  EXPECT_THAT(Feed(bad_key, bad, 1 << 20, bad.size(), /*strict=*/true),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'..'")));
  EXPECT_FALSE(Stored(bad_key));
}

}  // namespace
}  // namespace hlocache::server
