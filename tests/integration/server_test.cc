// `hlocache serve` driven over real sockets: round trips, every error status, roles, read-only,
// TLS, concurrency, SIGTERM during uploads, kill -9 during a put flood, malformed requests and
// slow clients.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cache/key.h"
#include "common/trace.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/cuda_payload.h"
#include "compiler/artifact/file_payload.h"
#include "compiler/cuda/nvrtc.h"
#include "server/file_listing.h"
#include "tests/hostile_graphs.h"
#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Module(int variant) {
  return "HloModule m" + std::to_string(variant) +
         "\nENTRY e {\n  a = f32[64] parameter(0)\n  b = f32[64] parameter(1)\n"
         "  c = f32[] constant(" +
         std::to_string(variant) +
         ")\n  d = f32[64] broadcast(c), dimensions={}\n  s = f32[64] add(a, b)\n"
         "  ROOT t = f32[64] multiply(s, d)\n}\n";
}

class ServerTest : public TestDirectory {
 protected:
  std::unique_ptr<ServerProcess> Start(std::vector<std::string> args = {},
                                       const std::string& dir = "store") {
    args.insert(args.end(), {"--access-log", (root_ / "access.log").string()});
    auto server = std::make_unique<ServerProcess>(HLOCACHE_BINARY, root_ / dir, args);
    EXPECT_TRUE(server->started()) << server->output();
    return server;
  }
};

TEST_F(ServerTest, RoundTripsFromOneByteTo256MiB) {
  auto server = Start();
  // Waits no longer than hlocache's own clients do: a server that answers a large upload only
  // after they gave up fails here.
  auto client = server->TierClient();
  uint64_t n = 0;
  for (size_t payload : {size_t{1}, size_t{4096}, size_t{1} << 20, (size_t{5} << 20) + 3,
                         size_t{64} << 20, size_t{256} << 20}) {
    const std::string key = TestKey(++n);
    const std::string artifact = MakeArtifact(key, payload, n);
    Trace("test client", "PUT of %zu bytes begins", artifact.size());
    auto put = server->TierClient(artifact.size())
                   ->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
    Trace("test client", "PUT of %zu bytes: %s", artifact.size(),
          put ? std::to_string(put->status).c_str() : httplib::to_string(put.error()).c_str());
    ASSERT_TRUE(put) << "payload " << payload << ": " << httplib::to_string(put.error());
    EXPECT_EQ(put->status, 201) << put->body;
    auto head = client->Head(("/v1/artifacts/" + key).c_str());
    ASSERT_TRUE(head) << httplib::to_string(head.error());
    EXPECT_EQ(head->status, 200);
    EXPECT_EQ(head->get_header_value("Content-Length"), std::to_string(artifact.size()));
    auto get = client->Get(("/v1/artifacts/" + key).c_str());
    ASSERT_TRUE(get) << "payload " << payload << ": " << httplib::to_string(get.error());
    EXPECT_EQ(get->status, 200);
    EXPECT_TRUE(get->body == artifact) << "payload " << payload << ": bytes differ";
    Trace("test client", "PUT again of %zu bytes begins", artifact.size());
    auto again = server->TierClient(artifact.size())
                     ->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
    Trace(
        "test client", "PUT again of %zu bytes: %s", artifact.size(),
        again ? std::to_string(again->status).c_str() : httplib::to_string(again.error()).c_str());
    ASSERT_TRUE(again) << "payload " << payload << ": " << httplib::to_string(again.error());
    EXPECT_EQ(again->status, 200);
  }
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

uint64_t MemoryTierHits(httplib::Client& client) {
  auto stats = client.Get("/v1/stats");
  if (!stats || stats->status != 200) return ~uint64_t{0};
  return nlohmann::json::parse(stats->body).value("memory_tier_hits", ~uint64_t{0});
}

// /v1/stats's "memory_tier" object (null without one, or when the stats cannot be read).
nlohmann::json MemoryTierHeld(httplib::Client& client) {
  auto stats = client.Get("/v1/stats");
  if (!stats || stats->status != 200) return nullptr;
  return nlohmann::json::parse(stats->body).value("memory_tier", nlohmann::json());
}

TEST_F(ServerTest, RepeatedHitsAreSentFromMemoryWhileTheStoreHoldsTheEntry) {
  auto server = Start({"--max-size", "6M"});
  auto client = server->TierClient(64 << 20);
  // One chunk (1 MiB), several chunks (the store's chunks are 4 MiB), and one too small to keep.
  const std::vector<size_t> payloads = {size_t{1} << 20, (size_t{9} << 20) / 2 + 5, 4096};
  std::vector<std::string> keys, artifacts;
  for (size_t i = 0; i < payloads.size(); ++i) {
    keys.push_back(TestKey(100 + i));
    artifacts.push_back(MakeArtifact(keys[i], payloads[i], 100 + i));
    auto put =
        client->Put(("/v1/artifacts/" + keys[i]).c_str(), artifacts[i], "application/octet-stream");
    ASSERT_TRUE(put && put->status == 201) << i;
  }
  uint64_t expected_memory_hits = 0;
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < payloads.size(); ++i) {
      auto get = client->Get(("/v1/artifacts/" + keys[i]).c_str());
      ASSERT_TRUE(get) << httplib::to_string(get.error());
      EXPECT_EQ(get->status, 200);
      EXPECT_TRUE(get->body == artifacts[i]) << "round " << round << ", artifact " << i;
      EXPECT_EQ(get->get_header_value("X-Hlocache-Checksum"), cache::HashBytes(artifacts[i]).Hex());
      // The first read fills the tier; the small one is never kept.
      if (round > 0 && payloads[i] > (64 << 10)) ++expected_memory_hits;
    }
    EXPECT_EQ(MemoryTierHits(*client), expected_memory_hits) << "round " << round;
  }
  // The tier holds the two large bodies, and says so in /v1/stats and /metrics.
  const nlohmann::json held = MemoryTierHeld(*client);
  EXPECT_EQ(held.value("bodies", 0u), 2u) << held.dump();
  EXPECT_EQ(held.value("bytes", uint64_t{0}), artifacts[0].size() + artifacts[1].size());
  EXPECT_EQ(held.value("capacity_bytes", uint64_t{0}), uint64_t{256} << 20);
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("\nhlocache_memory_tier_bytes " +
                               std::to_string(artifacts[0].size() + artifacts[1].size()) + "\n"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("\nhlocache_memory_tier_bodies 2\n"), std::string::npos);
  // A range of a kept body is the same range of the artifact.
  for (size_t i : {0, 1}) {
    auto range =
        client->Get(("/v1/artifacts/" + keys[i]).c_str(), {{"Range", "bytes=1000000-1000999"}});
    ASSERT_TRUE(range);
    EXPECT_EQ(range->status, 206);
    EXPECT_TRUE(range->body == artifacts[i].substr(1000000, 1000)) << i;
  }

  // Deleted: not served from memory.
  auto erased = client->Delete(("/v1/artifacts/" + keys[0]).c_str());
  ASSERT_TRUE(erased && erased->status == 204);
  auto after_delete = client->Get(("/v1/artifacts/" + keys[0]).c_str());
  ASSERT_TRUE(after_delete);
  EXPECT_EQ(after_delete->status, 404);
  EXPECT_EQ(MemoryTierHeld(*client).value("bytes", uint64_t{0}), artifacts[1].size());

  // Evicted by the store (past --max-size), which the tier is not told of: the store is asked on
  // every hit, so it is not served from memory either.
  const uint64_t memory_hits_before = MemoryTierHits(*client);
  for (uint64_t n = 200; n < 206; ++n) {
    const std::string filler = MakeArtifact(TestKey(n), 1 << 20, n);
    auto put =
        client->Put(("/v1/artifacts/" + TestKey(n)).c_str(), filler, "application/octet-stream");
    ASSERT_TRUE(put && put->status == 201) << n;
  }
  auto evicted = client->Head(("/v1/artifacts/" + keys[1]).c_str());
  ASSERT_TRUE(evicted);
  ASSERT_EQ(evicted->status, 404) << "the store kept it: the test proves nothing";
  auto after_evict = client->Get(("/v1/artifacts/" + keys[1]).c_str());
  ASSERT_TRUE(after_evict);
  EXPECT_EQ(after_evict->status, 404);
  EXPECT_EQ(MemoryTierHits(*client), memory_hits_before);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// A fleet starting at once asks for one large executable from many connections: each gets it
// whole while the first copy into memory is being made, and after it.
TEST_F(ServerTest, ManyClientsAtOnceOnOneLargeArtifactEachGetItWhole) {
  auto server = Start();
  const std::string key = TestKey(400);
  const std::string artifact = MakeArtifact(key, (size_t{9} << 20) + 7, 400);
  auto put = server->TierClient(artifact.size())
                 ->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
  ASSERT_TRUE(put && put->status == 201);
  constexpr int kClients = 12;
  for (int round = 0; round < 2; ++round) {
    std::atomic<int> whole{0};
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&] {
        auto get = server->TierClient(artifact.size())->Get(("/v1/artifacts/" + key).c_str());
        if (get && get->status == 200 && get->body == artifact) whole.fetch_add(1);
      });
    }
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(whole.load(), kClients) << "round " << round;
  }
  // One copy was kept, from one of the first round's streams.
  auto after = server->TierClient(artifact.size())->Get(("/v1/artifacts/" + key).c_str());
  ASSERT_TRUE(after && after->status == 200);
  EXPECT_TRUE(after->body == artifact);
  EXPECT_GE(MemoryTierHits(*server->Client()), 1u);
  const nlohmann::json held = MemoryTierHeld(*server->Client());
  EXPECT_EQ(held.value("bodies", 0u), 1u) << held.dump();
  EXPECT_EQ(held.value("bytes", uint64_t{0}), artifact.size());
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// The head of a PUT of `artifact` under `key`.
std::string PutHead(const std::string& key, const std::string& artifact) {
  return "PUT /v1/artifacts/" + key +
         " HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\n"
         "Content-Length: " +
         std::to_string(artifact.size()) + "\r\n\r\n";
}

std::string GetRequest(const std::string& key) {
  return "GET /v1/artifacts/" + key + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

// Whether the server runs with --zero-copy.
class SendModeTest : public ServerTest, public ::testing::WithParamInterface<bool> {
 protected:
  std::vector<std::string> Args(std::vector<std::string> args) const {
    if (GetParam()) args.push_back("--zero-copy");
    return args;
  }
};

TEST_P(SendModeTest, AHitFromMemoryCutShortLeavesNothingForTheNextReply) {
  // With --zero-copy a hit from the memory tier goes to the socket through a pipe of the
  // thread's, a megabyte at a time. A client that goes away mid-reply leaves bytes in that pipe,
  // which must not become the start of the thread's next reply: with one thread, each cut-short
  // hit is followed by a whole one on that same thread. Without, it is copied from memory, and
  // the same holds.
  auto server = Start(Args({"--threads", "1"}));
  const std::string key = TestKey(410);
  const std::string artifact = MakeArtifact(key, size_t{24} << 20, 410);
  auto client = server->TierClient(artifact.size());
  auto put = client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
  ASSERT_TRUE(put && put->status == 201);
  auto fill = client->Get(("/v1/artifacts/" + key).c_str());
  ASSERT_TRUE(fill && fill->status == 200 && fill->body == artifact);
  const uint64_t memory_hits_before = MemoryTierHits(*client);
  for (int round = 0; round < 3; ++round) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendFully(fd, GetRequest(key)));
    std::string got;
    while (got.size() < (1 << 20)) {  // A megabyte, then gone with the rest unread (a reset).
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      ASSERT_GT(n, 0) << "round " << round;
      got.append(buf, static_cast<size_t>(n));
    }
    linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    ::close(fd);
    auto whole = client->Get(("/v1/artifacts/" + key).c_str());
    ASSERT_TRUE(whole) << "round " << round << ": " << httplib::to_string(whole.error());
    EXPECT_EQ(whole->status, 200);
    EXPECT_TRUE(whole->body == artifact)
        << "round " << round << ": the reply after a cut-short one is not the artifact ("
        << whole->body.size() << " bytes)";
  }
  EXPECT_EQ(MemoryTierHits(*client), memory_hits_before + 6) << "not served from memory";
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

INSTANTIATE_TEST_SUITE_P(Sends, SendModeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& zero_copy) {
                           return std::string(zero_copy.param ? "ZeroCopy" : "Copied");
                         });

// Without the tier every hit streams from the store, chunk by chunk, ranges included: a range
// starts in whichever chunk holds its first byte.
TEST_F(ServerTest, MemoryTierOffServesEveryHitAndRangeFromTheStore) {
  auto server = Start({"--memory-tier", "0"});
  auto client = server->TierClient(64 << 20);
  for (size_t payload : {size_t{1} << 20, size_t{9} << 20}) {
    const std::string key = TestKey(300 + payload);
    const std::string artifact = MakeArtifact(key, payload, payload);
    auto put = client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
    ASSERT_TRUE(put && put->status == 201);
    for (int i = 0; i < 3; ++i) {
      auto get = client->Get(("/v1/artifacts/" + key).c_str());
      ASSERT_TRUE(get && get->status == 200);
      EXPECT_TRUE(get->body == artifact);
    }
    for (size_t from : {size_t{0}, size_t{1000}, size_t{5000000}, artifact.size() - 10}) {
      if (from >= artifact.size()) continue;
      const size_t last = std::min(from + 999, artifact.size() - 1);
      const std::string range = "bytes=" + std::to_string(from) + "-" + std::to_string(last);
      auto got = client->Get(("/v1/artifacts/" + key).c_str(), {{"Range", range}});
      ASSERT_TRUE(got) << range << ": " << httplib::to_string(got.error());
      EXPECT_EQ(got->status, 206) << range;
      EXPECT_TRUE(got->body == artifact.substr(from, last - from + 1))
          << payload << " bytes, " << range;
    }
  }
  EXPECT_EQ(MemoryTierHits(*client), 0u);
  EXPECT_TRUE(MemoryTierHeld(*client).is_null()) << "no tier, so no \"memory_tier\" in /v1/stats";
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_EQ(metrics->body.find("hlocache_memory_tier_bytes"), std::string::npos);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, FileArtifactsAreListedByNamespaceAndPrefixWithTheirSizes) {
  auto server = Start();
  auto client = server->Client();
  const std::vector<std::pair<std::string, std::string>> files = {
      {"jax/a-cache", std::string(100, 'a')},
      {"jax/b-cache", std::string(5 << 20, 'b')},  // Chunked in the store.
      {"jax/sub/c-cache", "c"},
      {"torch/x.bin", "x"}};
  for (const auto& [path, data] : files) {
    const std::string key = cache::ComposeFileKey("files", path);
    auto put = client->Put(("/v1/artifacts/" + key).c_str(),
                           compiler::EncodeFileArtifact(key, "files", path, data),
                           "application/octet-stream");
    ASSERT_TRUE(put);
    EXPECT_EQ(put->status, 201) << path << ": " << put->body;
  }
  // Another namespace's file of the same path is another file.
  const std::string other = cache::ComposeFileKey("other", "jax/a-cache");
  ASSERT_EQ(client
                ->Put(("/v1/artifacts/" + other).c_str(),
                      compiler::EncodeFileArtifact(other, "other", "jax/a-cache", "o"),
                      "application/octet-stream")
                ->status,
            201);
  auto listed = client->Get("/v1/files/files?prefix=jax/");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200) << listed->body;
  EXPECT_EQ(listed->get_header_value("Content-Type"), "application/x-ndjson");
  auto entries = server::ParseFileListing(listed->body);
  ASSERT_TRUE(entries.has_value()) << listed->body;
  ASSERT_EQ(entries->size(), 3u) << listed->body;
  EXPECT_EQ((*entries)[0].path, "jax/a-cache");
  EXPECT_EQ((*entries)[0].size, 100u);
  EXPECT_EQ((*entries)[1].size, uint64_t{5} << 20);
  EXPECT_EQ((*entries)[1].key, cache::ComposeFileKey("files", "jax/b-cache"));
  EXPECT_EQ((*entries)[2].path, "jax/sub/c-cache");
  auto one = client->Get("/v1/files/files?prefix=jax/&limit=1");
  ASSERT_TRUE(one);
  EXPECT_EQ(std::count(one->body.begin(), one->body.end(), '\n'), 1);
  auto others = client->Get("/v1/files/other");
  ASSERT_TRUE(others);
  EXPECT_THAT(others->body, HasSubstr("\"size\":1,"));
  EXPECT_THAT(others->body, ::testing::Not(HasSubstr("torch")));
  auto bad = client->Get("/v1/files/..");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("namespace"));
  EXPECT_EQ(client->Get("/v1/files/files?limit=x")->status, 400);
  // Counted by namespace: the uploads, a hit, and a miss of a client that names its namespace.
  const std::string a_key = cache::ComposeFileKey("files", "jax/a-cache");
  ASSERT_EQ(client->Get(("/v1/artifacts/" + a_key).c_str())->status, 200);
  const std::string absent = cache::ComposeFileKey("files", "jax/absent");
  ASSERT_EQ(client->Head(("/v1/artifacts/" + absent).c_str(), {{"X-Hlocache-Namespace", "files"}})
                ->status,
            404);
  auto stats = nlohmann::json::parse(client->Get("/v1/stats")->body);
  EXPECT_EQ(stats["files"]["files"], nlohmann::json({{"hits", 1}, {"misses", 1}, {"writes", 4}}));
  EXPECT_EQ(stats["files"]["other"]["writes"], 1);
  auto metrics = client->Get("/metrics");
  EXPECT_THAT(metrics->body,
              HasSubstr("hlocache_file_requests_total{namespace=\"files\",outcome=\"hit\"} 1"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, ErrorStatuses) {
  auto server = Start({"--max-body", "2M", "--compile-workers", "1", "--compile-queue", "0"});
  auto client = server->Client();
  const std::string key = TestKey(7);
  const std::string artifact = MakeArtifact(key, 1000, 7);
  auto status = [&](const httplib::Result& r) { return r ? r->status : -1; };

  EXPECT_EQ(status(client->Get("/v1/artifacts/not-a-key")), 400);
  EXPECT_EQ(status(client->Get(("/v1/artifacts/" + key).c_str())), 404);
  EXPECT_EQ(status(client->Head(("/v1/artifacts/" + key).c_str())), 404);
  EXPECT_EQ(status(client->Put("/v1/artifacts/V1-ABC", artifact, "application/octet-stream")), 400);
  // The artifact names another key: refused, and nothing is stored under either.
  EXPECT_EQ(status(client->Put(("/v1/artifacts/" + TestKey(8)).c_str(), artifact,
                               "application/octet-stream")),
            400);
  EXPECT_EQ(status(client->Head(("/v1/artifacts/" + TestKey(8)).c_str())), 404);
  // A flipped byte: the checksum catches it.
  std::string corrupt = artifact;
  corrupt[corrupt.size() / 2] ^= 1;
  auto bad = client->Put(("/v1/artifacts/" + key).c_str(), corrupt, "application/octet-stream");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("checksum"));
  EXPECT_EQ(status(client->Head(("/v1/artifacts/" + key).c_str())), 404);
  // Not a container at all, and one with trailing bytes.
  EXPECT_EQ(status(client->Put(("/v1/artifacts/" + key).c_str(), "hello world", "text/plain")),
            400);
  EXPECT_EQ(status(client->Put(("/v1/artifacts/" + key).c_str(), artifact + "x",
                               "application/octet-stream")),
            400);
  // Too large for --max-body.
  const std::string big = MakeArtifact(key, 3 << 20, 1);
  EXPECT_EQ(status(client->Put(("/v1/artifacts/" + key).c_str(), big, "application/octet-stream")),
            413);
  // The good one still goes in afterwards.
  client = server->Client();
  EXPECT_EQ(
      status(client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream")),
      201);
  // Methods a route does not take.
  EXPECT_EQ(status(client->Post(("/v1/artifacts/" + key).c_str(), "x", "text/plain")), 405);
  EXPECT_EQ(status(client->Get("/v1/compile")), 405);
  EXPECT_EQ(status(client->Get("/no/such/route")), 404);

  // Compile errors: parse error with line:col, unsupported op, unknown target.
  auto parse = client->Post("/v1/compile", "HloModule m\nENTRY e {\n  ROOT a = f32[2] bogus(\n}\n",
                            "text/plain");
  ASSERT_TRUE(parse);
  EXPECT_EQ(parse->status, 400);
  EXPECT_THAT(parse->body, ::testing::ContainsRegex("request:[0-9]+:[0-9]+"));
  auto unsupported = client->Post("/v1/compile", kUnsupportedModule, "text/plain");
  ASSERT_TRUE(unsupported);
  EXPECT_EQ(unsupported->status, 422) << unsupported->body;
  EXPECT_EQ(status(client->Post("/v1/compile?target=tpu-v5e", Module(1), "text/plain")), 422);
  EXPECT_EQ(status(client->Post("/v1/compile?target=bad%20target", Module(1), "text/plain")), 400);
  EXPECT_EQ(status(client->Post("/v1/compile", "", "text/plain")), 400);

  // A full compile queue: one worker, no queue; a second module while the first compiles.
  std::atomic<int> first_status{0};
  std::thread first([&] {
    first_status = status(server->Client()->Post("/v1/compile", Module(1), "text/plain"));
  });
  for (int i = 0; i < 2000; ++i) {
    auto stats = client->Get("/v1/stats");
    if (stats && nlohmann::json::parse(stats->body).value("compiles_running", 0) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto full = client->Post("/v1/compile", Module(2), "text/plain");
  first.join();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 503) << full->body;
  EXPECT_EQ(full->get_header_value("Retry-After"), "5");
  EXPECT_EQ(first_status.load(), 200);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, CompileTimeoutIs504AndLeavesNothing) {
  const fs::path cxx = root_ / "hanging-c++";
  std::ofstream(cxx) << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'g++ (Debian 12.2.0-14) "
                        "12.2.0'; exit 0; fi\nexec sleep 600\n";
  fs::permissions(cxx, fs::perms::owner_all);
  auto server = Start({"--cxx", cxx.string(), "--compile-timeout", "1"});
  auto r = server->Client()->Post("/v1/compile", Module(3), "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  EXPECT_THAT(r->body, HasSubstr("time limit"));
  auto stats = nlohmann::json::parse(server->Client()->Get("/v1/stats")->body);
  EXPECT_EQ(stats["entries"], 0);
  EXPECT_EQ(stats["compile_failures"], 1);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, CompileOnceForManyClientsThenHits) {
  auto server = Start({"--compile-workers", "2"});
  constexpr int kClients = 12;
  std::vector<std::string> bodies(kClients), kinds(kClients);
  std::vector<int> statuses(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto r = server->Client()->Post("/v1/compile?target=cpu-x86-64-v2", Module(5), "text/plain");
      statuses[i] = r ? r->status : -1;
      if (r) {
        bodies[i] = r->body;
        kinds[i] = r->get_header_value("X-Hlocache-Cache");
      }
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, int> by_kind;
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(statuses[i], 200) << bodies[i];
    EXPECT_EQ(bodies[i], bodies[0]);
    ++by_kind[kinds[i]];
  }
  EXPECT_EQ(by_kind["miss"], 1) << "exactly one request compiles";
  EXPECT_EQ(by_kind["miss"] + by_kind["coalesced"] + by_kind["hit"], kClients);
  auto client = server->Client();
  auto again = client->Post("/v1/compile?target=cpu-x86-64-v2", Module(5), "text/plain");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get_header_value("X-Hlocache-Cache"), "hit");
  // The key the server reports is the one /v1/keys computes, and GET serves the same bytes.
  auto keys = client->Post("/v1/keys?target=cpu-x86-64-v2", Module(5), "text/plain");
  ASSERT_TRUE(keys);
  const std::string key = nlohmann::json::parse(keys->body)["key"];
  EXPECT_EQ(key, again->get_header_value("X-Hlocache-Key"));
  EXPECT_EQ(client->Get(("/v1/artifacts/" + key).c_str())->body, bodies[0]);
  auto stats = nlohmann::json::parse(client->Get("/v1/stats")->body);
  EXPECT_EQ(stats["compiles"], 1);
  const std::string metrics = server->SettledMetrics();
  EXPECT_THAT(metrics, HasSubstr("hlocache_compiles_total 1\n"));
  // Every compile request is counted, the twelve and the one after them.
  EXPECT_THAT(metrics, HasSubstr("hlocache_http_requests_total{route=\"compile\",status=\"200\"} " +
                                 std::to_string(kClients + 1) + "\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "hlocache_compile_seconds_saved_total [0-9]*\\.[0-9]*[1-9]"));
  EXPECT_EQ(server->Stop(), 0);
}

// A server with no GPU builds GPU executables with NVRTC, so that CI and a CPU cache server
// can prewarm them for GPU hosts; without NVRTC it says so.
TEST_F(ServerTest, CompilesGpuExecutablesWithoutAGpu) {
  auto server = Start();
  auto client = server->Client();
  const bool have_nvrtc = compiler::Nvrtc::Get().has_value();
  for (const std::string target : {"cuda-sm_80", "cuda-sm_90"}) {
    auto r = client->Post(("/v1/compile?target=" + target).c_str(), Module(7), "text/plain");
    ASSERT_TRUE(r);
    if (!have_nvrtc) {
      EXPECT_EQ(r->status, 503);
      EXPECT_THAT(r->body, HasSubstr("NVRTC"));
      continue;
    }
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Hlocache-Cache"), "miss");
    auto decoded = compiler::DecodeArtifact(r->body);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().ToString();
    EXPECT_EQ(decoded->header.target, target);
    EXPECT_EQ(decoded->header.payload_kind, compiler::kPayloadCubinPlan);
    auto payload = compiler::DecodeCudaPayload(decoded->payload);
    ASSERT_TRUE(payload.has_value()) << payload.error().ToString();
    auto arch = compiler::CubinArch(payload->cubin);
    ASSERT_TRUE(arch.has_value());
    EXPECT_EQ("cuda-" + *arch, target);
    // The key names NVRTC's compiler id, and the next request is a hit.
    auto keys = client->Post(("/v1/keys?target=" + target).c_str(), Module(7), "text/plain");
    ASSERT_TRUE(keys);
    const auto j = nlohmann::json::parse(keys->body);
    EXPECT_EQ(j["key"], r->get_header_value("X-Hlocache-Key"));
    EXPECT_THAT(j["compiler_id"].get<std::string>(), StartsWith("nvrtc-"));
    auto again = client->Post(("/v1/compile?target=" + target).c_str(), Module(7), "text/plain");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->get_header_value("X-Hlocache-Cache"), "hit");
    EXPECT_EQ(again->body, r->body);
  }
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, RolesFromATokensFile) {
  const fs::path tokens = root_ / "tokens";
  std::ofstream(tokens) << "# role token\nread reader-token-1\nwrite writer-token-1\n"
                           "admin admin-token-1\n";
  auto server = Start({"--tokens", tokens.string()});
  const std::string key = TestKey(11);
  const std::string artifact = MakeArtifact(key, 500, 11);
  const std::string path = "/v1/artifacts/" + key;
  auto status = [](const httplib::Result& r) { return r ? r->status : -1; };
  EXPECT_EQ(status(server->Client()->Get("/healthz")), 200);
  auto anonymous = server->Client()->Get(path.c_str());
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(anonymous->get_header_value("WWW-Authenticate"), "Bearer realm=\"hlocache\"");
  EXPECT_EQ(status(server->Client("wrong-token-1")->Get(path.c_str())), 401);
  EXPECT_EQ(status(server->Client("reader-token-1")->Get(path.c_str())), 404);
  EXPECT_EQ(status(server->Client("reader-token-1")
                       ->Put(path.c_str(), artifact, "application/octet-stream")),
            403);
  EXPECT_EQ(status(server->Client()->Put(path.c_str(), artifact, "application/octet-stream")), 401);
  EXPECT_EQ(status(server->Client("writer-token-1")
                       ->Put(path.c_str(), artifact, "application/octet-stream")),
            201);
  EXPECT_EQ(status(server->Client("reader-token-1")->Get(path.c_str())), 200);
  EXPECT_EQ(status(server->Client("writer-token-1")->Delete(path.c_str())), 403);
  EXPECT_EQ(status(server->Client("admin-token-1")->Delete(path.c_str())), 204);
  EXPECT_EQ(status(server->Client("reader-token-1")->Get(path.c_str())), 404);
  EXPECT_EQ(status(server->Client()->Get("/metrics")), 401);
  EXPECT_EQ(status(server->Client("reader-token-1")->Get("/metrics")), 200);
  EXPECT_EQ(server->Stop(), 0);
  // No token is ever written to the access log or the server's output.
  std::ifstream log(root_ / "access.log");
  std::stringstream ss;
  ss << log.rdbuf() << server->output();
  EXPECT_THAT(ss.str(), ::testing::Not(HasSubstr("token-1")));
  EXPECT_THAT(ss.str(), HasSubstr("\"PUT " + path + "\" 201"));
}

TEST_F(ServerTest, ReadOnlyRefusesEveryWrite) {
  const std::string key = TestKey(21);
  const std::string artifact = MakeArtifact(key, 2000, 21);
  std::string compiled_key;
  {
    auto writer = Start();
    auto client = writer->Client();
    ASSERT_EQ(
        client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream")->status,
        201);
    auto compiled = client->Post("/v1/compile", Module(9), "text/plain");
    ASSERT_EQ(compiled->status, 200) << compiled->body;
    compiled_key = compiled->get_header_value("X-Hlocache-Key");
    ASSERT_EQ(writer->Stop(), 0);
  }
  const fs::path tokens = root_ / "tokens";
  std::ofstream(tokens) << "admin admin-token-2\n";
  auto server = Start({"--readonly", "--tokens", tokens.string()});
  auto client = server->Client("admin-token-2");
  EXPECT_EQ(client->Get(("/v1/artifacts/" + key).c_str())->body, artifact);
  auto put = client->Put(("/v1/artifacts/" + TestKey(22)).c_str(), MakeArtifact(TestKey(22), 10, 1),
                         "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 403);
  EXPECT_THAT(put->body, HasSubstr("read-only"));
  client = server->Client("admin-token-2");
  EXPECT_EQ(client->Delete(("/v1/artifacts/" + key).c_str())->status, 403);
  auto hit = client->Post("/v1/compile", Module(9), "text/plain");
  EXPECT_EQ(hit->status, 200);
  EXPECT_EQ(hit->get_header_value("X-Hlocache-Cache"), "hit");
  EXPECT_EQ(client->Post("/v1/compile", Module(10), "text/plain")->status, 403);
  EXPECT_EQ(client->Get(("/v1/artifacts/" + key).c_str())->status, 200);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, ServesHttpsWithACertificate) {
  const std::string cert = (root_ / "cert.pem").string(), key = (root_ / "key.pem").string();
  ASSERT_TRUE(MakeSelfSignedCertificate(cert, key)) << "openssl could not make a certificate";
  auto server = Start({"--tls-cert", cert, "--tls-key", key});
  ASSERT_TRUE(server->started());
  EXPECT_EQ(server->url().rfind("https://", 0), 0u) << server->url();
  httplib::SSLClient client("127.0.0.1", server->port());
  client.set_ca_cert_path(cert.c_str());
  // The transport is what is under test here; client_test checks certificate verification.
  client.enable_server_certificate_verification(false);
  const std::string artifact_key = TestKey(31);
  const std::string artifact = MakeArtifact(artifact_key, 100000, 31);
  auto put =
      client.Put(("/v1/artifacts/" + artifact_key).c_str(), artifact, "application/octet-stream");
  ASSERT_TRUE(put) << httplib::to_string(put.error());
  EXPECT_EQ(put->status, 201);
  // The first read fills the memory tier, the second is sent from it: over TLS both go
  // through the library's stream, from memory, not from the file.
  for (int read = 0; read < 2; ++read) {
    auto get = client.Get(("/v1/artifacts/" + artifact_key).c_str());
    ASSERT_TRUE(get) << httplib::to_string(get.error());
    EXPECT_TRUE(get->body == artifact) << "read " << read;
  }
  auto stats = client.Get("/v1/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(nlohmann::json::parse(stats->body).value("memory_tier_hits", 0), 1);
  // Plain HTTP to the TLS port gets nothing.
  EXPECT_LE(RawExchange(server->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, RefusesOpenListeningWithoutTokensAndASecondOwner) {
  ServerProcess open(HLOCACHE_BINARY, root_ / "open", {"--listen", "0.0.0.0:0"});
  EXPECT_FALSE(open.started());
  EXPECT_EQ(open.Wait(std::chrono::seconds(10)), 1);
  EXPECT_THAT(open.output(), HasSubstr("--tokens"));
  auto first = Start();
  ServerProcess second(HLOCACHE_BINARY, root_ / "store", {});
  EXPECT_FALSE(second.started());
  EXPECT_EQ(second.Wait(std::chrono::seconds(10)), 1);
  EXPECT_THAT(second.output(), HasSubstr(first->url()));
  EXPECT_EQ(first->Stop(), 0);
  EXPECT_FALSE(fs::exists(root_ / "store" / "server.json"));
}

TEST_F(ServerTest, ThirtyTwoClientsMixingEverything) {
  auto server = Start({"--compile-workers", "2"});
  constexpr int kClients = 32;
  std::atomic<int> errors{0}, mismatches{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 10) failures.push_back(what);
  };
  // Shared artifacts everyone reads.
  std::vector<std::string> shared;
  for (int i = 0; i < 8; ++i) {
    shared.push_back(MakeArtifact(TestKey(1000 + i), 4096u << (i % 6), 1000 + i));
    ASSERT_EQ(server->Client()
                  ->Put(("/v1/artifacts/" + TestKey(1000 + i)).c_str(), shared.back(),
                        "application/octet-stream")
                  ->status,
              201);
  }
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = server->Client();
      for (int round = 0; round < 12; ++round) {
        const int which = (c + round) % 8;
        auto get = client->Get(("/v1/artifacts/" + TestKey(1000 + which)).c_str());
        if (!get || get->status != 200) {
          fail("hit " + std::to_string(get ? get->status : -1));
        } else if (get->body != shared[which]) {
          ++mismatches;
        }
        auto miss = client->Get(("/v1/artifacts/" + TestKey(5000 + c * 100 + round)).c_str());
        if (!miss || miss->status != 404) fail("miss");
        const std::string own_key = TestKey(20000 + c * 100 + round);
        const std::string own = MakeArtifact(own_key, 1000 + 997 * round, c * 100 + round);
        auto put =
            client->Put(("/v1/artifacts/" + own_key).c_str(), own, "application/octet-stream");
        if (!put || put->status != 201) fail("put " + std::to_string(put ? put->status : -1));
        auto back = client->Get(("/v1/artifacts/" + own_key).c_str());
        if (!back || back->body != own) ++mismatches;
        if (round % 4 == 0) {
          auto compiled = client->Post("/v1/compile", Module(40 + c % 3), "text/plain");
          if (!compiled || compiled->status != 200)
            fail("compile " + std::to_string(compiled ? compiled->status : -1));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0) << (failures.empty() ? "" : failures[0]);
  EXPECT_EQ(mismatches.load(), 0);
  auto stats = nlohmann::json::parse(server->Client()->Get("/v1/stats")->body);
  EXPECT_EQ(stats["compiles"], 3) << "three distinct modules, each compiled once";
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, SigtermDuringUploadsDrainsAndKeepsEveryKeyWhole) {
  auto server = Start();
  constexpr int kUploads = 6;
  std::vector<std::string> artifacts;
  for (int i = 0; i < kUploads; ++i)
    artifacts.push_back(MakeArtifact(TestKey(300 + i), 24 << 20, i));
  std::vector<int> statuses(kUploads, 0);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kUploads; ++i) {
    threads.emplace_back([&, i] {
      auto client = server->Client();
      ++started;
      auto r = client->Put(("/v1/artifacts/" + TestKey(300 + i)).c_str(), artifacts[i],
                           "application/octet-stream");
      statuses[i] = r ? r->status : -1;
    });
  }
  while (started < kUploads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // SIGTERM once the server is receiving uploads (the stats request itself is one in flight).
  for (int i = 0; i < 3000; ++i) {
    auto stats = server->Client()->Get("/v1/stats");
    if (stats && nlohmann::json::parse(stats->body).value("requests_in_flight", 0) >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->output();
  for (auto& t : threads) t.join();
  EXPECT_THAT(server->output(), HasSubstr("stopped"));
  // New connections are refused once it has stopped.
  EXPECT_EQ(RawExchange(server->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                        std::chrono::milliseconds(500)),
            0);
  auto again = Start();
  auto client = again->Client();
  int whole = 0;
  for (int i = 0; i < kUploads; ++i) {
    auto get = client->Get(("/v1/artifacts/" + TestKey(300 + i)).c_str());
    ASSERT_TRUE(get);
    if (statuses[i] == 201) {
      EXPECT_EQ(get->status, 200) << "an acknowledged upload was lost";
    }
    if (get->status == 200) {
      EXPECT_TRUE(get->body == artifacts[i]);
      ++whole;
    } else {
      EXPECT_EQ(get->status, 404);
    }
  }
  EXPECT_GT(whole, 0) << "the uploads in flight were cut off instead of finished";
  EXPECT_EQ(again->Stop(), 0);
}

TEST_F(ServerTest, KillDashNineDuringAPutFloodLeavesKeysAbsentOrIntact) {
  auto server = Start();
  constexpr int kWriters = 6;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, std::string> sent;  // Every key attempted, with its bytes.
  std::map<std::string, bool> acknowledged;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto client = server->Client();
      client->set_read_timeout(std::chrono::seconds(5));
      for (int i = 0; !stop; ++i) {
        const std::string key = TestKey(100000 + w * 10000 + i);
        const std::string artifact = MakeArtifact(key, (i % 3 == 0) ? (5 << 20) + i : 20000 + i, i);
        {
          std::lock_guard<std::mutex> lock(mu);
          sent[key] = artifact;
        }
        auto r =
            client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
        if (r && r->status == 201) {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged[key] = true;
        }
        if (!r) break;
      }
    });
  }
  // The kill lands once the flood is well under way, however slow this machine is today (a
  // fixed delay left nothing acknowledged on a loaded machine under ASan).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (acknowledged.size() >= 12) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // Mid-put, most likely.
  server->Stop(SIGKILL);
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_FALSE(acknowledged.empty());
  auto again = Start();
  auto client = again->Client();
  int intact = 0;
  for (const auto& [key, bytes] : sent) {
    auto get = client->Get(("/v1/artifacts/" + key).c_str());
    ASSERT_TRUE(get);
    if (get->status == 200) {
      EXPECT_TRUE(get->body == bytes) << key << " came back different";
      ++intact;
    } else {
      EXPECT_EQ(get->status, 404);
      EXPECT_FALSE(acknowledged.count(key)) << key << " was acknowledged, then lost";
    }
  }
  EXPECT_GE(intact, static_cast<int>(acknowledged.size()));
  EXPECT_EQ(again->Stop(), 0);
}

TEST_F(ServerTest, LenientHeadersAre400AndOversizedHeadsAre431) {
  auto server = Start({});
  std::string many = "GET /v1/stats HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10000; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  const std::string get = "GET /v1/stats HTTP/1.1\r\nHost: x\r\n";
  const std::vector<std::tuple<std::string, std::string, int, std::string>> cases = {
      {"no colon", get + "NoColonHere\r\n\r\n", 400, "without a colon"},
      {"obs-fold", get + "X-A: 1\r\n  folded\r\n\r\n", 400, "obsolete line folding"},
      {"space before colon", "GET /v1/stats HTTP/1.1\r\nHost : x\r\n\r\n", 400,
       "whitespace between a header's name and its colon"},
      {"10,000 header lines", many + "\r\n", 431, "more than 100 header lines"},
      {"a 100 KB header", get + "X-Big: " + std::string(100000, 'b') + "\r\n\r\n", 431,
       "longer than 64 KiB"},
  };
  for (const auto& [name, request, status, why] : cases) {
    std::string reply;
    EXPECT_EQ(RawExchange(server->port(), request, std::chrono::seconds(10), &reply), status)
        << name << ": " << reply;
    EXPECT_THAT(reply, HasSubstr("error: ")) << name;
    EXPECT_THAT(reply, HasSubstr(why)) << name;
    EXPECT_THAT(reply, HasSubstr("Connection: close")) << name;
  }
  // The server goes on serving well-formed requests.
  auto ok = server->Client()->Get("/v1/stats");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, MalformedRequestsGetA4xxOrAClosedConnection) {
  auto server = Start({"--io-timeout", "2", "--max-body", "1M"});
  const std::string key = TestKey(50);
  const std::string artifact = MakeArtifact(key, 3000, 50);
  const std::string head = "PUT /v1/artifacts/" + key + " HTTP/1.1\r\nHost: x\r\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"garbage", "\x16\x03\x01garbage\r\n\r\n"},
      {"no method", "/v1/stats HTTP/1.1\r\n\r\n"},
      {"unknown method", "BREW /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"bad version", "GET /v1/stats HTTP/9.9\r\nHost: x\r\n\r\n"},
      {"no version", "GET /v1/stats\r\n\r\n"},
      {"dotdot", "GET /v1/artifacts/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"dotdot key", "GET /v1/artifacts/.. HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"encoded slash", "GET /v1/artifacts/v1-%2f..%2fetc HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"encoded dotdot", "GET /v1/artifacts/%2e%2e HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"uppercase key",
       "GET /v1/artifacts/V1-0123456789ABCDEF0123456789ABCDEF HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"short key", "GET /v1/artifacts/v1-0123 HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"long key",
       "GET /v1/artifacts/v1-" + std::string(5000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"nul in key", std::string("GET /v1/artifacts/v1-\0abc HTTP/1.1\r\nHost: x\r\n\r\n", 45)},
      {"huge uri", "GET /" + std::string(70000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"wrong method",
       "POST /v1/artifacts/" + key + " HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"},
      {"patch", "PATCH /v1/stats HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"},
      {"huge content-length", head + "Content-Length: 99999999999999\r\n\r\nabc"},
      {"negative content-length", head + "Content-Length: -5\r\n\r\nabc"},
      {"non-numeric content-length", head + "Content-Length: abc\r\n\r\nabc"},
      {"missing content-length", head + "\r\n"},
      {"zero content-length", head + "Content-Length: 0\r\n\r\n"},
      {"truncated body", head + "Content-Length: " + std::to_string(artifact.size()) + "\r\n\r\n" +
                             artifact.substr(0, 1000)},
      {"body of another key", "PUT /v1/artifacts/" + TestKey(51) +
                                  " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                  std::to_string(artifact.size()) + "\r\n\r\n" + artifact},
      {"not a container", head + "Content-Length: 5\r\n\r\nhello"},
      {"bad chunked", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"},
      {"absolute uri", "GET http://elsewhere/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"empty key", "DELETE /v1/artifacts/ HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"huge header", "GET /v1/stats HTTP/1.1\r\nX-Big: " + std::string(100000, 'b') + "\r\n\r\n"},
      {"compile empty", "POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"},
      {"compile binary",
       "POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00\x01"},
      {"compile truncated",
       "POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nHloModule"},
      {"keys bad target",
       "POST /v1/keys?target=%00%01 HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nHloModule"},
      {"delete bad key", "DELETE /v1/artifacts/nope HTTP/1.1\r\nHost: x\r\n\r\n"},
      {"expect too big", head + "Content-Length: 5000000\r\nExpect: 100-continue\r\n\r\n"},
      {"head of a bad key", "HEAD /v1/artifacts/zz HTTP/1.1\r\nHost: x\r\n\r\n"},
  };
  ASSERT_GE(cases.size(), 30u);
  for (const auto& [name, bytes] : cases) {
    std::string reply;
    const int status = RawExchange(server->port(), bytes, std::chrono::seconds(8), &reply);
    EXPECT_TRUE(status == 0 || (status >= 400 && status < 500))
        << name << ": got " << status << "\n"
        << reply.substr(0, 300);
    // Still healthy after each.
    auto health = server->Client()->Get("/healthz");
    ASSERT_TRUE(health) << "server unreachable after: " << name;
    ASSERT_EQ(health->status, 200) << name;
  }
  // Nothing bad was stored.
  auto stats = nlohmann::json::parse(server->Client()->Get("/v1/stats")->body);
  EXPECT_EQ(stats["entries"], 0);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, ASlowClientIsCutOffWhileOthersAreServed) {
  auto server = Start({"--io-timeout", "1", "--threads", "4"});
  // Four connections that send half a request line and then nothing: every thread busy.
  std::vector<std::thread> slow;
  std::atomic<int> closed{0};
  for (int i = 0; i < 4; ++i) {
    slow.emplace_back([&] {
      if (RawExchange(server->port(), "GET /v1/sta", std::chrono::seconds(20)) == 0) ++closed;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Served once the stalled connections time out, well before they would have finished.
  auto start = std::chrono::steady_clock::now();
  auto client = server->Client();
  auto health = client->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (auto& t : slow) t.join();
  EXPECT_EQ(closed.load(), 4) << "a stalled client kept its connection";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(server->Stop(), 0);
}

// One HTTP reply read from `fd`: its status line and headers, then as many body bytes as its
// Content-Length says. Empty when the connection closed, or nothing came for 20 s.
std::string ReadReply(int fd) {
  std::string reply;
  size_t want = std::string::npos;
  while (reply.size() < want) {
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    if (::poll(&p, 1, 20000) <= 0) return "";
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    reply.append(buf, static_cast<size_t>(n));
    const size_t head_end = reply.find("\r\n\r\n");
    if (want == std::string::npos && head_end != std::string::npos) {
      const size_t at = reply.find("Content-Length: ");
      if (at == std::string::npos || at > head_end) return "";
      want = head_end + 4 + std::stoul(reply.substr(at + 16));
    }
  }
  return reply;
}

TEST_F(ServerTest, IdleKeepAliveConnectionsHoldNoThread) {
  // Three times as many connections as threads, each answered once and then left idle: were
  // an idle connection to hold its thread, the later ones would get no reply until the
  // earlier ones were closed as idle (after 5 s), and those could not ask a second time.
  auto server = Start({"--threads", "2"});
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: idle\r\n\r\n";
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    EXPECT_THAT(ReadReply(fd), StartsWith("HTTP/1.1 200")) << "connection " << i;
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    ASSERT_EQ(::send(fds[i], request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    EXPECT_THAT(ReadReply(fds[i]), StartsWith("HTTP/1.1 200"))
        << "connection " << i << " was closed while idle, or not answered again";
  }
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// Descriptors the process `pid` holds open.
size_t OpenDescriptors(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                           std::filesystem::directory_iterator()));
}

TEST_F(ServerTest, AConnectionIdlePastTheKeepAliveTimeoutIsClosedWhileBusyOnesStay) {
  // The server closes a keep-alive connection after 5 s without a request. An idle one must be
  // closed (the client reads the end of the stream, and the server's descriptor goes with it),
  // while one that asks every half second stays open and answered throughout.
  auto server = Start({"--threads", "2"});
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: idle\r\n\r\n";
  const int idle = ConnectLoopback(server->port());
  const int busy = ConnectLoopback(server->port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(busy, 0);
  for (int fd : {idle, busy}) {
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    ASSERT_THAT(ReadReply(fd), StartsWith("HTTP/1.1 200"));
  }
  // Counted once both have been served, so that whatever a first request opens is counted too.
  const size_t with_both = OpenDescriptors(server->pid());
  bool idle_closed = false;
  for (int round = 0; round < 30 && !idle_closed; ++round) {  // 15 s at most.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ASSERT_EQ(::send(busy, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()))
        << "round " << round;
    ASSERT_THAT(ReadReply(busy), StartsWith("HTTP/1.1 200"))
        << "a connection in use was closed in round " << round;
    char byte;
    errno = 0;
    const ssize_t n = ::recv(idle, &byte, 1, MSG_DONTWAIT);
    ASSERT_FALSE(n > 0) << "the idle connection was sent bytes nobody asked for";
    idle_closed = n == 0 || errno == ECONNRESET;
  }
  EXPECT_TRUE(idle_closed) << "a connection idle for 15 s was not closed";
  // Its descriptor is released too, not only shut down (the busy one still holds its own).
  bool released = false;
  for (int i = 0; i < 50 && !released; ++i) {
    released = OpenDescriptors(server->pid()) == with_both - 1;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(released) << OpenDescriptors(server->pid()) << " descriptors, " << with_both
                        << " while both connections were open";
  ::close(idle);
  ::close(busy);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(ServerTest, RequestsThatBlockLeaveTheRestOfThePoolListening) {
  // Forty connections that send half a request line and then wait: each holds a thread,
  // blocked on its headers for up to --io-timeout, more than the few threads that listen for
  // ready connections. Spares must take over listening, so another client is answered while
  // all forty are still waiting, not once the first of them is cut off.
  auto server = Start({"--io-timeout", "20", "--threads", "64"});
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    const int fd = ConnectLoopback(server->port());
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
    ASSERT_EQ(::send(fd, "GET /v1/sta", 11, MSG_NOSIGNAL), 11);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto health = server->Client()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (size_t i = 0; i < slow.size(); ++i) {
    char byte;
    errno = 0;
    const ssize_t n = ::recv(slow[i], &byte, 1, MSG_DONTWAIT);
    EXPECT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        << "slow connection " << i << " was answered or closed before the other client was";
  }
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// What holds a thread in BatchTest: a request the library reads (an upload that stops
// halfway), a large reply the client does not read, small replies it does not read.
enum class Holdup { kStalledUpload, kLargeReplyUnread, kSmallRepliesUnread };

class BatchTest : public ServerTest, public ::testing::WithParamInterface<Holdup> {};

const char* NameOf(Holdup holdup) {
  switch (holdup) {
    case Holdup::kStalledUpload:
      return "StalledUpload";
    case Holdup::kLargeReplyUnread:
      return "LargeReplyUnread";
    case Holdup::kSmallRepliesUnread:
      return "SmallRepliesUnread";
  }
  return "";
}

void PrintTo(Holdup holdup, std::ostream* out) { *out << NameOf(holdup); }

TEST_P(BatchTest, AHitClaimedWithARequestThatHoldsItsThreadIsAnsweredByAnother) {
  // A thread claims every connection one wait finds ready and serves them in turn, but must hand
  // back those it has not begun before anything holds it. Two threads, both listening: two
  // uploads that stop halfway take both. Then one connection sends what holds a thread, and a
  // second asks for a small hit. When the first upload ends, its thread finds the two ready and
  // claims them together, the holding one first (it was ready first). The hit must be answered
  // once the second upload frees the other thread, while the first connection still holds its
  // own; kept in the batch, it would wait for the io-timeout.
  auto server = Start({"--threads", "2", "--io-timeout", "60"});
  auto client = server->TierClient(64 << 20);
  const std::string small_key = TestKey(1), medium_key = TestKey(2), large_key = TestKey(3);
  const std::string small = MakeArtifact(small_key, 4096, 1);
  const std::string medium = MakeArtifact(medium_key, 60000, 2);  // Read from the store.
  const std::string large = MakeArtifact(large_key, size_t{32} << 20, 3);
  for (const auto& [key, artifact] :
       {std::pair(small_key, small), std::pair(medium_key, medium), std::pair(large_key, large)}) {
    auto put = client->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
    ASSERT_TRUE(put && put->status == 201) << key;
  }
  auto fill = client->Get(("/v1/artifacts/" + large_key).c_str());  // Into the memory tier.
  ASSERT_TRUE(fill && fill->status == 200);
  client.reset();

  std::vector<std::string> uploads;
  std::vector<int> uploaders;
  for (int i = 0; i < 3; ++i) {
    uploads.push_back(MakeArtifact(TestKey(10 + static_cast<uint64_t>(i)), 1000, 10 + i));
    uploaders.push_back(ConnectLoopback(server->port()));
    ASSERT_GE(uploaders.back(), 0);
  }
  // Half of each of the first two: both threads wait for the rest.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(SendFully(
        uploaders[i],
        PutHead(TestKey(10 + static_cast<uint64_t>(i)), uploads[i]) + uploads[i].substr(0, 500)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  const int holding = ConnectLoopback(server->port());
  const int hit = ConnectLoopback(server->port());
  ASSERT_GE(holding, 0);
  ASSERT_GE(hit, 0);
  switch (GetParam()) {
    case Holdup::kStalledUpload:
      ASSERT_TRUE(SendFully(holding, PutHead(TestKey(12), uploads[2]) + uploads[2].substr(0, 500)));
      break;
    case Holdup::kLargeReplyUnread:  // 32 MiB: more than the two sockets' buffers hold.
      ASSERT_TRUE(SendFully(holding, GetRequest(large_key)));
      break;
    case Holdup::kSmallRepliesUnread: {  // Pipelined: over 10 MB of replies to the first 16 KiB.
      std::string requests;
      for (int i = 0; i < 400; ++i) requests += GetRequest(medium_key);
      ASSERT_TRUE(SendFully(holding, requests));
      break;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(SendFully(hit, GetRequest(small_key)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  // The first upload ends: its thread claims the holding connection and the hit together.
  ASSERT_TRUE(SendFully(uploaders[0], uploads[0].substr(500)));
  EXPECT_THAT(ReadReply(uploaders[0]), StartsWith("HTTP/1.1 201"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The second ends: its thread is the one free to answer the hit.
  ASSERT_TRUE(SendFully(uploaders[1], uploads[1].substr(500)));
  EXPECT_THAT(ReadReply(uploaders[1]), StartsWith("HTTP/1.1 201"));
  const std::string reply = ReadReply(hit);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200"))
      << "the hit waited behind the connection claimed with it";
  EXPECT_TRUE(reply.size() > small.size() &&
              reply.compare(reply.size() - small.size(), small.size(), small) == 0);
  // The holding connection was still held: no reply at all to the stalled upload.
  if (GetParam() == Holdup::kStalledUpload) {
    char byte;
    errno = 0;
    EXPECT_TRUE(::recv(holding, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN)
        << "the stalled upload was answered: it held nothing";
  }
  for (int fd : uploaders) ::close(fd);
  ::close(holding);  // Its thread's wait ends with the connection.
  ::close(hit);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

INSTANTIATE_TEST_SUITE_P(Holdups, BatchTest,
                         ::testing::Values(Holdup::kStalledUpload, Holdup::kLargeReplyUnread,
                                           Holdup::kSmallRepliesUnread),
                         [](const ::testing::TestParamInfo<Holdup>& holdup) {
                           return std::string(NameOf(holdup.param));
                         });

TEST_F(ServerTest, PoolThreadsAreNamedForWhoLooksAtTheProcess) {
  // Each thread of the pool is named hlocache-pool (server/connection.h), as `top -H`, perf and
  // /proc/PID/task show it; no other thread is.
  auto server = Start({"--threads", "3"});
  const fs::path tasks = "/proc/" + std::to_string(server->pid()) + "/task";
  // The pool starts as the server starts listening, maybe just after it says where.
  size_t pool = 0;
  for (int i = 0; i < 100 && pool != 3; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pool = 0;
    for (const auto& task : fs::directory_iterator(tasks)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == "hlocache-pool") ++pool;
    }
  }
  EXPECT_EQ(pool, 3u);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// A real full disk: the store on a small tmpfs. A put that does not fit is 507; what was
// stored stays readable.
// Sends `prefix` at once, then `request` one byte every `gap`; how many bytes of `request` went
// out before the server closed the connection (all of them if it never did).
size_t Trickle(int port, const std::string& prefix, const std::string& request,
               std::chrono::milliseconds gap) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return 0;
  if (!prefix.empty() && ::send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL) !=
                             static_cast<ssize_t>(prefix.size())) {
    ::close(fd);
    return 0;
  }
  size_t sent = 0;
  for (; sent < request.size(); ++sent) {
    char probe;
    // A closed connection reads as end of file (or a reset) before the next byte goes out.
    errno = 0;
    if (::recv(fd, &probe, 1, MSG_DONTWAIT) == 0 || errno == ECONNRESET) break;
    if (::send(fd, request.data() + sent, 1, MSG_NOSIGNAL) != 1) break;
    std::this_thread::sleep_for(gap);
  }
  ::close(fd);
  return sent;
}

TEST_F(ServerTest, AClientTricklingItsHeadersOrItsBodyIsCutOff) {
  // Each byte arrives well within --io-timeout, so only a deadline on the headers as a whole,
  // and a minimum rate for a body, can end these; at 250 ms a byte each would take 15 s.
  auto server = Start({"--io-timeout", "2", "--threads", "2"});
  const std::string request =
      "GET /healthz HTTP/1.1\r\nHost: trickle\r\nX-Padding: " + std::string(20, 'p') + "\r\n\r\n";
  const std::string key = TestKey(51);
  const std::string body = MakeArtifact(key, 10, 51).substr(0, 60);
  const std::string upload_head =
      "PUT /v1/artifacts/" + key +
      " HTTP/1.1\r\nHost: trickle\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  std::vector<size_t> sent(2);
  std::vector<std::thread> tricklers;
  tricklers.emplace_back(
      [&] { sent[0] = Trickle(server->port(), "", request, std::chrono::milliseconds(250)); });
  tricklers.emplace_back([&] {
    sent[1] = Trickle(server->port(), upload_head, body, std::chrono::milliseconds(250));
  });
  for (auto& t : tricklers) t.join();
  EXPECT_LT(sent[0], request.size()) << "a client trickling its headers finished them";
  EXPECT_LT(sent[1], body.size()) << "a client trickling its body finished it";
  auto health = server->Client()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = server->Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("hlocache_requests_cut_short_total 2\n"));
  EXPECT_EQ(server->Stop(), 0);
  // Neither request reached a reply, so neither has an access-log line: the server says why.
  EXPECT_THAT(server->output(),
              HasSubstr("was cut short: its line and headers took longer than 2000 ms"));
  EXPECT_THAT(server->output(),
              HasSubstr("was cut short: its body arrived slower than 500 bytes/s"));
}

TEST_F(ServerTest, ARefusedBodyEndsTheConnectionAndTheReplyStillArrives) {
  auto server = Start({"--max-body", "1M"});
  const std::string key = TestKey(41);
  // Refused before its body is read (a bad key; too large), with the body sent in full, then
  // another request on the same connection: the reply says Connection: close, arrives whole,
  // and the body is never read as a request.
  for (const std::string& head :
       {std::string(
            "PUT /v1/artifacts/not-a-key HTTP/1.1\r\nHost: x\r\nContent-Length: 600000\r\n\r\n"),
        "PUT /v1/artifacts/" + key + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n"}) {
    const size_t length = std::stoul(head.substr(head.find("Length: ") + 8));
    std::string reply;
    const std::string next = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    const int status = RawExchange(server->port(), head + std::string(length, 'G') + next,
                                   std::chrono::seconds(20), &reply);
    EXPECT_THAT(status, ::testing::AnyOf(400, 413)) << reply;
    EXPECT_THAT(reply, HasSubstr("Connection: close"));
    EXPECT_EQ(reply.find("HTTP/1.1", 1), std::string::npos)
        << "the connection carried on after a refused body: " << reply;
  }
  auto metrics = server->Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, ::testing::Not(HasSubstr("route=\"other\"")))
      << "a refused body was parsed as a request";
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, VerifyUploadsComputesTheKeyAgainFromTheCarriedGraph) {
  // A real artifact, built by a server's compile.
  auto builder = Start({}, "builder");
  auto built =
      builder->Client()->Post("/v1/compile?target=cpu-x86-64-v2", Module(21), "text/plain");
  ASSERT_TRUE(built);
  ASSERT_EQ(built->status, 200) << built->body;
  const std::string key = built->get_header_value("X-Hlocache-Key");
  const std::string artifact = built->body;
  auto decoded = compiler::DecodeArtifact(artifact);
  ASSERT_TRUE(decoded.has_value());
  ASSERT_FALSE(decoded->header.graph_zstd.empty()) << "a built artifact carries its graph";

  auto server = Start({"--verify-uploads"});
  auto client = server->Client();
  auto put = [&](const std::string& k, const std::string& bytes) {
    return client->Put(("/v1/artifacts/" + k).c_str(), bytes, "application/octet-stream");
  };
  auto good = put(key, artifact);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 201) << good->body;

  // Relabeled for another target, or stored under another key with a header to match: the
  // graph keys to something else. Without a graph there is nothing to check against.
  compiler::ArtifactHeader relabeled = decoded->header;
  relabeled.target = "cpu-x86-64-v3";
  const std::string other = TestKey(77);
  compiler::ArtifactHeader renamed = decoded->header;
  renamed.key = other;
  const std::vector<std::pair<std::string, std::string>> forged = {
      {key, compiler::EncodeArtifact(relabeled, decoded->payload)},
      {other, compiler::EncodeArtifact(renamed, decoded->payload)},
      {TestKey(78), MakeArtifact(TestKey(78), 500, 78)},
  };
  for (const auto& [k, bytes] : forged) {
    client = server->Client();
    auto r = put(k, bytes);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;  // Checked before "already stored".
  }
  client = server->Client();
  auto renamed_reply = put(other, compiler::EncodeArtifact(renamed, decoded->payload));
  ASSERT_TRUE(renamed_reply);
  EXPECT_THAT(renamed_reply->body, HasSubstr("key to " + key + ", not " + other));
  auto bare = put(TestKey(78), MakeArtifact(TestKey(78), 500, 78));
  ASSERT_TRUE(bare);
  EXPECT_THAT(bare->body, HasSubstr("carries no graph"));
  client = server->Client();
  EXPECT_EQ(client->Head(("/v1/artifacts/" + other).c_str())->status, 404);
  EXPECT_EQ(server->Stop(), 0);
}

// An uploader chooses the graph the server decompresses to key it again: one of 24 bytes that
// claimed a gigabyte made the server allocate and zero that gigabyte for each such upload, and a
// few at once would have it killed for memory. Refused now with what zstd's bounded window
// costs, and the server goes on.
TEST_F(ServerTest, VerifyUploadsRefusesAGraphClaimingAGigabyteWithoutTheGigabyte) {
  auto server = Start({"--verify-uploads"});
  const std::string key = TestKey(79);
  const std::string sample_bytes = MakeArtifact(key, 7, 79);  // the decoded views point into it
  auto sample = compiler::DecodeArtifact(sample_bytes);
  ASSERT_TRUE(sample.has_value());
  compiler::ArtifactHeader header = sample->header;
  const uint64_t before = testing::PeakResidentBytes(server->pid(), /*reset=*/true);
  ASSERT_GT(before, 0u) << "no VmHWM for the server";
  // A gigabyte in one segment, with a window of 1 KiB and of 1 GiB; and a frame of zstd's 0.7
  // format, whose window the limit on current frames does not bound.
  for (const std::string& graph :
       {testing::ZstdFrame(uint64_t{1} << 30, "x"),
        testing::ZstdFrame(uint64_t{1} << 30, "x", "", /*window_exponent=*/0),
        testing::ZstdFrame(uint64_t{1} << 30, "x", "", /*window_exponent=*/20),
        testing::LegacyZstdFrame()}) {
    header.graph_zstd = testing::Base64(graph);
    auto r = server->Client()->Put(("/v1/artifacts/" + key).c_str(),
                                   compiler::EncodeArtifact(header, sample->payload),
                                   "application/octet-stream");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_THAT(r->body, HasSubstr("graph"));
  }
  EXPECT_LT(testing::PeakResidentBytes(server->pid(), false), before + (128 << 20))
      << "before: " << before;
  EXPECT_EQ(server->Client()->Head(("/v1/artifacts/" + key).c_str())->status, 404);
  EXPECT_EQ(server->Client()->Get("/healthz")->status, 200);
  EXPECT_EQ(server->Stop(), 0);
}

TEST_F(ServerTest, DiskFullIs507AndReadsGoOn) {
  const fs::path mount_point = root_ / "small";
  fs::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=96m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  {
    auto server = Start({}, "small/store");
    auto client = server->Client();
    const std::string small_key = TestKey(60);
    const std::string small = MakeArtifact(small_key, 100000, 60);
    ASSERT_EQ(client->Put(("/v1/artifacts/" + small_key).c_str(), small, "application/octet-stream")
                  ->status,
              201);
    int full = 0;
    for (int i = 0; i < 8 && full == 0; ++i) {
      const std::string key = TestKey(61 + i);
      auto r = server->Client()->Put(("/v1/artifacts/" + key).c_str(),
                                     MakeArtifact(key, 20 << 20, i), "application/octet-stream");
      ASSERT_TRUE(r) << httplib::to_string(r.error()) << "\n" << server->output();
      if (r->status == 507) {
        ++full;
      } else {
        EXPECT_EQ(r->status, 201) << r->body;
      }
    }
    EXPECT_EQ(full, 1) << "the disk never filled";
    auto get = server->Client()->Get(("/v1/artifacts/" + small_key).c_str());
    ASSERT_TRUE(get);
    EXPECT_TRUE(get->body == small);
    EXPECT_EQ(server->Stop(), 0);
  }
  ::umount2(mount_point.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace hlocache::testing
