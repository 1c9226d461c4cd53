// File artifacts' names and keys (cache/key.h), and their container (file_payload.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/key.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::cache {
namespace {

using ::testing::HasSubstr;

TEST(FileKeyTest, NamesKeyApartAndNeverCollideWithTheirParts) {
  const std::string k = ComposeFileKey("files", "jax/abc-cache");
  EXPECT_TRUE(IsWellFormedKey(k));
  EXPECT_EQ(k, ComposeFileKey("files", "jax/abc-cache")) << "the same name, the same key";
  EXPECT_NE(k, ComposeFileKey("other", "jax/abc-cache")) << "namespaces keep names apart";
  EXPECT_NE(k, ComposeFileKey("files", "jax/abc-cachf"));
  // Length prefixes: moving a byte from one part to the other is another key.
  EXPECT_NE(ComposeFileKey("ab", "c"), ComposeFileKey("a", "bc"));
}

TEST(FileKeyTest, NamespacesAreShortPlainWords) {
  for (const char* good : {"files", "torch_xla", "jax-0.4", "A.b_c-9"}) {
    EXPECT_THAT(ValidateFileNamespace(good), IsOk()) << good;
  }
  for (const char* bad : {"", ".", "..", "a/b", "sp ace", "plus+", "é"}) {
    EXPECT_THAT(ValidateFileNamespace(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ValidateFileNamespace(std::string(65, 'a')), StatusIs(StatusCode::kInvalidArgument));
}

TEST(FileKeyTest, PathsAreRelativeUtf8WithinPosixLimits) {
  for (const char* good : {"a", "a/b/c.bin", ".lockfile", "ü/日本.bin", "k-cache"}) {
    EXPECT_THAT(ValidateFilePath(good), IsOk()) << good;
  }
  EXPECT_THAT(ValidateFilePath(std::string(255, 'n')), IsOk());
  const std::pair<std::string, const char*> bad[] = {
      {"", "1 to 4096"},
      {"/abs", "empty"},
      {"a//b", "empty"},
      {"a/./b", "'.'"},
      {"../up", "'..'"},
      {"trailing/", "empty"},
      {std::string(256, 'n'), "255"},
      {std::string(4097, 'n'), "4096"},
      {std::string("nul\0byte", 8), "NUL"},
      {"bad\xff", "UTF-8"},
      {"\xc0\xaf", "UTF-8"},      // Overlong '/'.
      {"\xed\xa0\x80", "UTF-8"},  // A surrogate.
      {"cut\xe6\x97", "UTF-8"},   // A sequence cut short.
  };
  for (const auto& [path, why] : bad) {
    EXPECT_THAT(ValidateFilePath(path), StatusIs(StatusCode::kInvalidArgument, HasSubstr(why)))
        << path.substr(0, 40);
  }
}

TEST(FileArtifactTest, StreamedEncodingIsTheWholeOneAndItsOverheadFollowsFromTheName) {
  const std::string key = ComposeFileKey("files", "dir/x.bin");
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  const std::string whole = compiler::EncodeFileArtifact(key, "files", "dir/x.bin", payload);
  compiler::FileArtifactEncoder encoder(key, "files", "dir/x.bin", payload.size());
  std::string streamed = encoder.Prefix();
  for (size_t at = 0; at < payload.size(); at += 777) {
    const std::string_view piece = std::string_view(payload).substr(at, 777);
    encoder.Hash(piece);
    streamed += piece;
  }
  streamed += encoder.Trailer();
  EXPECT_TRUE(streamed == whole) << "piece by piece, the same container";
  EXPECT_EQ(whole.size() - payload.size(),
            compiler::FileArtifactOverhead(key, "files", "dir/x.bin"));
  auto decoded = compiler::DecodeArtifact(whole);
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(decoded->payload, payload);
  EXPECT_EQ(decoded->header.file_namespace, "files");
  EXPECT_EQ(decoded->header.file_path, "dir/x.bin");
  EXPECT_THAT(compiler::CheckFileArtifactHeader(decoded->header, key), IsOk());
  EXPECT_THAT(compiler::CheckFileArtifactHeader(decoded->header, ComposeFileKey("files", "y")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("stored for key")));
}

TEST(FileArtifactTest, AnExecutableIsNotAFile) {
  compiler::ArtifactHeader h;
  h.key = ComposeFileKey("files", "x");
  h.target = "cpu-x86-64-v3";
  h.compiler_id = "gcc";
  h.payload_kind = "shared-object";
  EXPECT_THAT(compiler::CheckFileArtifactHeader(h, h.key),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a file's")));
  h.payload_kind = "file";
  EXPECT_THAT(compiler::CheckFileArtifactHeader(h, h.key),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'file'")));
}

}  // namespace
}  // namespace hlocache::cache
