// `hlocache serve --upstream`: per-host servers in front of one origin, all real processes on
// loopback. (tests/integration/multi_host_test.py runs the same arrangement across network
// namespaces.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr const char* kCompilePath = "/v1/compile?target=cpu-x86-64-v2";

std::string Graph(int variant) {
  return "HloModule graph" + std::to_string(variant) +
         "\nENTRY e {\n  x = f32[16,8] parameter(0)\n  k = f32[] constant(" +
         std::to_string(variant) +
         ")\n  b = f32[16,8] broadcast(k), dimensions={}\n  ROOT y = f32[16,8] subtract(x, b)\n}\n";
}

std::string ArtifactPath(const std::string& key) { return "/v1/artifacts/" + key; }

// Polls `condition` every 100 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return condition();
}

class UpstreamTest : public TestDirectory {
 protected:
  std::unique_ptr<ServerProcess> Start(const std::string& dir, std::vector<std::string> args = {}) {
    args.insert(args.end(), {"--access-log", ""});
    auto server = std::make_unique<ServerProcess>(HLOCACHE_BINARY, root_ / dir, args);
    EXPECT_TRUE(server->started()) << server->output();
    return server;
  }
  std::unique_ptr<ServerProcess> StartHost(const std::string& dir, const ServerProcess& origin) {
    return Start(dir, {"--upstream", origin.url()});
  }
  static Json Stats(const ServerProcess& server) {
    auto r = server.Client()->Get("/v1/stats");
    if (!r || r->status != 200) return Json::object();
    return Json::parse(r->body);
  }
  static int GetStatus(const ServerProcess& server, const std::string& key) {
    auto r = server.Client()->Get(ArtifactPath(key));
    return r ? r->status : -1;
  }
};

TEST_F(UpstreamTest, OneCompileOnTheOriginServesEveryHost) {
  auto origin = Start("origin", {"--compile-workers", "2"});
  auto host_a = StartHost("a", *origin);
  auto host_b = StartHost("b", *origin);
  constexpr int kPerHost = 8;
  std::vector<std::string> bodies(2 * kPerHost), kinds(2 * kPerHost);
  std::vector<int> statuses(2 * kPerHost, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2 * kPerHost; ++i) {
    threads.emplace_back([&, i] {
      const ServerProcess& host = i < kPerHost ? *host_a : *host_b;
      auto r = host.Client()->Post(kCompilePath, Graph(1), "text/plain");
      if (!r) return;
      statuses[i] = r->status;
      bodies[i] = r->body;
      kinds[i] = r->get_header_value("X-Hlocache-Cache");
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2 * kPerHost; ++i) {
    EXPECT_EQ(statuses[i], 200) << bodies[i];
    EXPECT_EQ(bodies[i], bodies[0]) << "request " << i;
    EXPECT_THAT(kinds[i], ::testing::AnyOf("miss", "coalesced", "hit"));
  }
  EXPECT_EQ(Stats(*origin)["compiles"], 1) << "one compile for both hosts";
  for (const ServerProcess* host : {host_a.get(), host_b.get()}) {
    const Json stats = Stats(*host);
    EXPECT_EQ(stats["compiles"], 0) << "a host compiles nothing while the origin answers";
    EXPECT_EQ(stats["upstream"]["compiles"], 1) << "each host asks the origin once";
    EXPECT_EQ(stats["upstream"]["failures"], 0);
  }
  // The artifact was kept on each host: the next request is a local hit, with the same bytes.
  auto again = host_b->Client()->Post(kCompilePath, Graph(1), "text/plain");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get_header_value("X-Hlocache-Cache"), "hit");
  EXPECT_EQ(again->body, bodies[0]);
  EXPECT_EQ(Stats(*origin)["compiles"], 1);
}

TEST_F(UpstreamTest, ReadsThroughKeepsWhatItFetchedAndForwardsUploads) {
  auto origin = Start("origin");
  auto host = StartHost("host", *origin);
  const std::string small_key = TestKey(1), large_key = TestKey(2), head_key = TestKey(3);
  const std::string small = MakeArtifact(small_key, 3000, 1);
  const std::string large = MakeArtifact(large_key, (size_t{9} << 20) + 5, 2);  // Streamed.
  for (const auto& [key, bytes] : {std::pair{small_key, small},
                                   {large_key, large},
                                   {head_key, MakeArtifact(head_key, 10, 3)}}) {
    auto put = origin->Client()->Put(ArtifactPath(key), bytes, "application/octet-stream");
    ASSERT_TRUE(put);
    ASSERT_EQ(put->status, 201) << put->body;
  }
  for (const auto& [key, bytes] : {std::pair{small_key, small}, {large_key, large}}) {
    auto get = host->Client()->Get(ArtifactPath(key));
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 200) << get->body;
    EXPECT_EQ(get->get_header_value("X-Hlocache-Source"), "upstream");
    EXPECT_TRUE(get->body == bytes) << key << ": bytes differ";
  }
  // HEAD asks the origin without fetching.
  auto head = host->Client()->Head(ArtifactPath(head_key));
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->get_header_value("X-Hlocache-Source"), "upstream");
  EXPECT_EQ(Stats(*host)["entries"], 2);
  EXPECT_EQ(Stats(*host)["upstream"]["fetches"], 2);
  EXPECT_EQ(GetStatus(*host, TestKey(4)), 404);
  EXPECT_EQ(Stats(*host)["upstream"]["fetch_misses"], 1);

  // An upload to the host reaches the origin in the background.
  const std::string uploaded_key = TestKey(5);
  const std::string uploaded = MakeArtifact(uploaded_key, 5000, 5);
  auto put = host->Client()->Put(ArtifactPath(uploaded_key), uploaded, "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201) << put->body;
  EXPECT_TRUE(Eventually([&] { return GetStatus(*origin, uploaded_key) == 200; }));
  EXPECT_EQ(origin->Client()->Get(ArtifactPath(uploaded_key))->body, uploaded);

  // Without the origin, what the host fetched is still served, from the host's own store.
  ASSERT_EQ(origin->Stop(), 0);
  for (const auto& [key, bytes] : {std::pair{small_key, small}, {large_key, large}}) {
    auto get = host->Client()->Get(ArtifactPath(key));
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 200);
    EXPECT_FALSE(get->has_header("X-Hlocache-Source"));
    EXPECT_TRUE(get->body == bytes);
  }
  EXPECT_EQ(GetStatus(*host, head_key), 404) << "a HEAD fetched nothing";
  auto metrics = host->Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("hlocache_upstream_up 0\n"));
  EXPECT_THAT(metrics->body, ::testing::ContainsRegex("hlocache_upstream_failures_total [1-9]"));
  EXPECT_EQ(host->Stop(), 0) << host->output();
}

TEST_F(UpstreamTest, WithoutTheOriginAHostCompilesItselfAndCatchesUpLater) {
  auto origin = Start("origin");
  const int origin_port = origin->port();
  auto host = StartHost("host", *origin);
  ASSERT_EQ(origin->Stop(), 0);

  std::vector<std::string> keys;
  for (int variant : {2, 3}) {
    auto r = host->Client()->Post(kCompilePath, Graph(variant), "text/plain");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Hlocache-Cache"), "miss");
    keys.push_back(r->get_header_value("X-Hlocache-Key"));
  }
  const std::string put_key = TestKey(9);
  const std::string put_bytes = MakeArtifact(put_key, 777, 9);
  auto put = host->Client()->Put(ArtifactPath(put_key), put_bytes, "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201);
  keys.push_back(put_key);

  // Two lookups back to back: the first may try the origin and fail, the second falls inside
  // the backoff that failure started and does not try.
  EXPECT_EQ(GetStatus(*host, TestKey(12)), 404);
  EXPECT_EQ(GetStatus(*host, TestKey(13)), 404);

  Json stats = Stats(*host);
  EXPECT_EQ(stats["compiles"], 2) << "both misses were compiled here";
  EXPECT_GE(stats["upstream"]["failures"].get<int>(), 1);
  EXPECT_GE(stats["upstream"]["skipped"].get<int>(), 1) << "a dead origin is not asked each time";
  EXPECT_EQ(stats["upstream"]["up"], false);

  // The origin comes back (same address, its store as it was): the host uploads what it built.
  origin = Start("origin", {"--listen", "127.0.0.1:" + std::to_string(origin_port)});
  ASSERT_TRUE(origin->started());
  for (const std::string& key : keys) {
    EXPECT_TRUE(Eventually([&] { return GetStatus(*origin, key) == 200; })) << key;
  }
  EXPECT_EQ(origin->Client()->Get(ArtifactPath(put_key))->body, put_bytes);
  EXPECT_TRUE(Eventually([&] { return Stats(*host)["upstream"]["pending_uploads"] == 0; }));
  stats = Stats(*host);
  EXPECT_EQ(stats["upstream"]["uploads"], 3);
  EXPECT_EQ(stats["upstream"]["up"], true);
  EXPECT_EQ(Stats(*origin)["compiles"], 0) << "the origin received them, it built none";
}

TEST_F(UpstreamTest, UploadsStillQueuedAtAStopAreSentAfterTheNextStart) {
  auto origin = Start("origin");
  const std::string origin_url = origin->url();
  ASSERT_EQ(origin->Stop(), 0);
  auto host = Start("host", {"--upstream", origin_url});
  const std::string key = TestKey(21);
  const std::string bytes = MakeArtifact(key, 2048, 21);
  auto put = host->Client()->Put(ArtifactPath(key), bytes, "application/octet-stream");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 201);
  EXPECT_EQ(Stats(*host)["upstream"]["pending_uploads"], 1);
  ASSERT_EQ(host->Stop(), 0);
  EXPECT_THAT(host->output(), HasSubstr("1 uploads to upstream " + origin_url + " kept in"));
  EXPECT_TRUE(std::filesystem::exists(root_ / "host" / "upstream-pending"));

  origin = Start("origin", {"--listen", origin_url.substr(std::string("http://").size())});
  ASSERT_TRUE(origin->started());
  host = Start("host", {"--upstream", origin_url});
  EXPECT_TRUE(Eventually([&] { return GetStatus(*origin, key) == 200; }));
  EXPECT_EQ(origin->Client()->Get(ArtifactPath(key))->body, bytes);
  ASSERT_EQ(host->Stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(root_ / "host" / "upstream-pending"))
      << "nothing left to keep";
}

TEST_F(UpstreamTest, AnHttpsOriginWithTokensIsVerifiedAndAuthenticated) {
  const std::string cert = (root_ / "cert.pem").string(), key = (root_ / "key.pem").string();
  ASSERT_TRUE(MakeSelfSignedCertificate(cert, key)) << "openssl could not make a certificate";
  const std::string tokens = (root_ / "tokens").string();
  {
    std::ofstream out(tokens);
    out << "write host-token-with-enough-length\nread reader-token-with-enough-length\n";
  }
  auto origin = Start("origin", {"--tls-cert", cert, "--tls-key", key, "--tokens", tokens});
  ASSERT_EQ(origin->url().rfind("https://", 0), 0u) << origin->url();
  auto trusting = Start("trusting", {"--upstream", origin->url(), "--upstream-ca-cert", cert,
                                     "--upstream-token", "host-token-with-enough-length"});
  auto r = trusting->Client()->Post(kCompilePath, Graph(31), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-Hlocache-Origin"), "miss") << "the origin compiled it";
  EXPECT_EQ(Stats(*trusting)["compiles"], 0);
  // Its upload reaches the origin with the write token.
  const std::string put_key = TestKey(32);
  auto put = trusting->Client()->Put(ArtifactPath(put_key), MakeArtifact(put_key, 900, 32),
                                     "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201);
  EXPECT_TRUE(Eventually([&] { return Stats(*trusting)["upstream"]["uploads"] == 1; }));

  // Without the CA the origin's certificate does not verify; with a read token, uploads are
  // refused. Either way the host carries on alone and counts it.
  auto doubting = Start("doubting", {"--upstream", origin->url()});
  auto alone = doubting->Client()->Post(kCompilePath, Graph(33), "text/plain");
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->status, 200);
  EXPECT_FALSE(alone->has_header("X-Hlocache-Origin"));
  EXPECT_EQ(Stats(*doubting)["compiles"], 1);
  EXPECT_GE(Stats(*doubting)["upstream"]["failures"].get<int>(), 1);
  auto reader = Start("reader", {"--upstream", origin->url(), "--upstream-ca-cert", cert,
                                 "--upstream-token", "reader-token-with-enough-length"});
  const std::string refused_key = TestKey(34);
  put = reader->Client()->Put(ArtifactPath(refused_key), MakeArtifact(refused_key, 900, 34),
                              "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201) << "stored here whatever the origin says";
  EXPECT_TRUE(Eventually([&] { return Stats(*reader)["upstream"]["uploads_refused"] == 1; }));
  EXPECT_EQ(Stats(*reader)["upstream"]["pending_uploads"], 0) << "a refusal is not retried";
}

TEST_F(UpstreamTest, TheOriginsVerdictOnAModuleIsPassedOnNotRetriedHere) {
  auto origin = Start("origin");
  auto host = StartHost("host", *origin);
  auto bad = host->Client()->Post(kCompilePath, "HloModule broken\nENTRY e {\n  ROOT x = \n",
                                  "text/plain");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto unsupported = host->Client()->Post(kCompilePath, kUnsupportedModule, "text/plain");
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(unsupported->status, 422) << unsupported->body;
  EXPECT_THAT(unsupported->body, HasSubstr("upstream"));
  const Json stats = Stats(*host);
  EXPECT_EQ(stats["compiles"], 0);
  EXPECT_EQ(stats["compile_failures"], 0) << "the host did not try the module itself";
  EXPECT_EQ(stats["upstream"]["failures"], 0);
}

TEST_F(UpstreamTest, AnArtifactThatFailsItsCheckIsNeitherKeptNorServed) {
  // A fake origin that serves a container whose payload was altered after it was sealed.
  const std::string key = TestKey(11);
  std::string corrupt = MakeArtifact(key, 4000, 11);
  corrupt[corrupt.size() - 100] ^= 0x20;
  httplib::Server fake;
  fake.Get(R"(/v1/artifacts/(.*))", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(corrupt, "application/octet-stream");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  auto host = Start("host", {"--upstream", "http://127.0.0.1:" + std::to_string(port)});
  auto get = host->Client()->Get(ArtifactPath(key));
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);
  EXPECT_EQ(Stats(*host)["entries"], 0);
  EXPECT_EQ(host->Stop(), 0);
  EXPECT_THAT(host->output(), HasSubstr("checksum"));
  fake.stop();
  serving.join();
}

TEST_F(UpstreamTest, BadUpstreamOptionsAreRefusedAndADryRunStartsNothing) {
  const std::string serve = std::string(HLOCACHE_BINARY) + " serve --dir " + (root_ / "s").string();
  EXPECT_THAT(CommandOutput(serve + " --upstream ftp://origin:21 2>&1; echo status=$?"),
              HasSubstr("is not an http:// or https:// URL\nstatus=1"));
  EXPECT_THAT(
      CommandOutput(serve + " --readonly --upstream http://origin:7070 2>&1; echo status=$?"),
      HasSubstr("do not go together: a server reading through keeps what it fetches\n"
                "status=1"));
  EXPECT_THAT(
      CommandOutput(serve + " --listen 0.0.0.0:7070 --insecure-open --upstream http://origin:7070 "
                            "--dry-run; echo status=$?"),
      HasSubstr("would serve " + (root_ / "s").string() +
                " on 0.0.0.0:7070, reading through to http://origin:7070\nstatus=0"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "s")) << "a dry run opens no store";
}

TEST_F(UpstreamTest, AListOfOriginsAndOneBucketIsCheckedPartByPart) {
  const std::string serve = std::string(HLOCACHE_BINARY) + " serve --dir " + (root_ / "s").string();
  EXPECT_THAT(CommandOutput(serve + " --upstream 'http://a:1, ftp://b:2' 2>&1; echo status=$?"),
              HasSubstr("--upstream: 'ftp://b:2' is not an http:// or https:// URL\nstatus=1"));
  EXPECT_THAT(
      CommandOutput(serve + " --upstream s3://one,http://a:1,s3://two 2>&1; echo status=$?"),
      HasSubstr("--upstream: one bucket at most, not s3://one and s3://two\nstatus=1"));
  EXPECT_THAT(CommandOutput(serve + " --upstream http://a:1,http://a:1/ 2>&1; echo status=$?"),
              HasSubstr("--upstream: http://a:1 given twice\nstatus=1"));
  EXPECT_THAT(CommandOutput(serve + " --upstream ' , ' 2>&1; echo status=$?"),
              HasSubstr("--upstream: no origin or bucket given\nstatus=1"));
  EXPECT_THAT(CommandOutput(serve + " --upstream 'http://a:1, https://b:2' --dry-run; "
                                    "echo status=$?"),
              HasSubstr("reading through to http://a:1, https://b:2\nstatus=0"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "s"));
}

}  // namespace
}  // namespace hlocache::testing
