// An hlocache server as a storage backend (storage/http_backend.h), against the real server:
// what each answer becomes, so that the client's tiers and a server's upstream, which both
// use it, rest only when the server is out of reach.
#include "storage/http_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::testing {
namespace {

using storage::Backend;
using ::testing::HasSubstr;

constexpr const char* kTarget = "cpu-x86-64-v2";

class HttpBackendTest : public TestDirectory {
 protected:
  std::unique_ptr<ServerProcess> Start(std::vector<std::string> args = {}) {
    auto server =
        std::make_unique<ServerProcess>(HLOCACHE_BINARY, root_ / "store", std::move(args));
    EXPECT_TRUE(server->started()) << server->output();
    return server;
  }
  static std::unique_ptr<Backend> Make(const std::string& url, const std::string& token = "") {
    storage::HttpBackendOptions options;
    options.token = token;
    auto backend = storage::MakeHttpBackend(url, options);
    EXPECT_THAT(backend, IsOk());
    return backend ? std::move(*backend) : nullptr;
  }
};

TEST_F(HttpBackendTest, HeadReadAndWriteAnArtifactOfSeveralMegabytes) {
  auto server = Start();
  auto backend = Make(server->url() + "/");
  EXPECT_EQ(backend->name(), server->url());
  EXPECT_TRUE(backend->remote());
  const std::string key = TestKey(1);
  auto head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
  auto miss = backend->Get(key);
  ASSERT_THAT(miss, IsOk());
  EXPECT_FALSE(miss->has_value());

  const std::string artifact = MakeArtifact(key, 6 << 20, 1);
  // In pieces, as a server uploads from a store reader.
  size_t at = 0;
  storage::ChunkSource pieces = [&]() -> Result<std::string_view> {
    std::string_view piece = std::string_view(artifact).substr(at, 1 << 20);
    at += piece.size();
    return piece;
  };
  ASSERT_THAT(backend->Write(key, artifact.size(), pieces, {}), IsOk());
  head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_EQ(head->value_or(0), artifact.size());
  auto got = backend->Get(key);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == artifact);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(HttpBackendTest, ARefusedRequestIsNotAnUnreachableServer) {
  std::ofstream(root_ / "tokens") << "read reader-token\nwrite writer-token\n";
  auto server = Start({"--tokens", (root_ / "tokens").string()});
  const std::string key = TestKey(2);
  const std::string artifact = MakeArtifact(key, 4000, 2);
  // No token: refused, kPermissionDenied (a client does not rest on it).
  EXPECT_THAT(Make(server->url())->Put(key, artifact, {}),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("401")));
  // A reader may not write.
  EXPECT_THAT(Make(server->url(), "reader-token")->Put(key, artifact, {}),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("403")));
  // An artifact that fails the server's checks: the request's fault, kInvalidArgument.
  std::string corrupt = artifact;
  corrupt[corrupt.size() - 10] ^= 1;
  auto writer = Make(server->url(), "writer-token");
  EXPECT_THAT(writer->Put(key, corrupt, {}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(writer->Put(key, artifact, {}), IsOk());
  auto got = Make(server->url(), "reader-token")->Get(key);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == artifact);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(HttpBackendTest, CompilesAndTheModulesFaultIsToldApartFromTheServers) {
  auto server = Start();
  auto backend = Make(server->url());
  EXPECT_TRUE(backend->CanCompile(kTarget));
  EXPECT_FALSE(backend->CanCompile("tpu-v5"));
  const std::string module =
      "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n";
  auto compiled = backend->Compile(module, kTarget);
  ASSERT_THAT(compiled, IsOk());
  EXPECT_EQ(compiled->cache_status, "miss");
  EXPECT_TRUE(compiled->key.starts_with("v1-")) << compiled->key;
  EXPECT_FALSE(compiled->artifact.empty());
  auto again = backend->Compile(module, kTarget);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->cache_status, "hit");
  EXPECT_EQ(again->key, compiled->key);
  EXPECT_THAT(backend->Compile("HloModule broken\nENTRY e {\n  ROOT x = \n", kTarget),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("400")));
  EXPECT_THAT(backend->Compile(kUnsupportedModule, kTarget),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("422")));
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(HttpBackendTest, NobodyListeningIsUnavailable) {
  auto server = Start();
  const std::string url = server->url();
  EXPECT_EQ(server->Stop(), 0);
  auto backend = Make(url);
  EXPECT_THAT(backend->Head(TestKey(3)), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(backend->Get(TestKey(3)), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(backend->Put(TestKey(3), MakeArtifact(TestKey(3), 100, 3), {}),
              StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(backend->Compile("HloModule m", kTarget), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(storage::MakeHttpBackend("ftp://example.com", {}),
              StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hlocache::testing
