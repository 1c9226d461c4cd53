// The plain server's quick path for hits (server/connection.h, QuickAnswerer), driven over real
// sockets against the real binary: its replies are the library's byte for byte, requests of
// every other shape still go to the library, in order on one connection, and its hits are
// admitted, counted and logged as the library's are. Which path answered is read from the
// server's trace (HLOCACHE_TRACE_FILE).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// What came back on one connection for bytes written at once: whole replies, in order.
struct Exchange {
  std::vector<std::string> replies;
  bool closed = false;  // The server closed the connection.
};

// Writes `bytes` to the server, then reads until `count` replies have come whole (by their
// Content-Length; replies to HEAD, `head_only`, end with their head), the server closes the
// connection, or 10 s pass.
Exchange Send(int port, const std::string& bytes, size_t count, bool head_only = false) {
  Exchange out;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return out;
  SendFully(fd, bytes);
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  timeval tv{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (std::chrono::steady_clock::now() < deadline) {
    // Whole replies at the front of what arrived.
    while (out.replies.size() < count) {
      const size_t end = got.find("\r\n\r\n");
      if (end == std::string::npos) break;
      const size_t cl = got.find("Content-Length: ");
      if (cl == std::string::npos || cl > end) break;
      const size_t length = head_only ? 0 : std::stoul(got.substr(cl + 16));
      if (got.size() < end + 4 + length) break;
      out.replies.push_back(got.substr(0, end + 4 + length));
      got.erase(0, end + 4 + length);
    }
    if (out.replies.size() == count && count > 0 &&
        out.replies.back().find("Connection: close") == std::string::npos) {
      break;  // All here, and the connection stays open.
    }
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      out.closed = true;
      break;
    }
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string Get(const std::string& path, const std::string& fields) {
  return "GET " + path + " HTTP/1.1\r\n" + fields + "\r\n";
}

std::string Head(const std::string& path, const std::string& fields) {
  return "HEAD " + path + " HTTP/1.1\r\n" + fields + "\r\n";
}

std::string BodyOf(const std::string& reply) { return reply.substr(reply.find("\r\n\r\n") + 4); }

class QuickPathTest : public TestDirectory {
 protected:
  void SetUp() override {
    TestDirectory::SetUp();
    trace_ = root_ / "trace.log";
    ::setenv("HLOCACHE_TRACE_FILE", trace_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("HLOCACHE_TRACE_FILE");
    TestDirectory::TearDown();
  }

  std::unique_ptr<ServerProcess> Start(std::vector<std::string> args = {}) {
    args.insert(args.end(), {"--access-log", (root_ / "access.log").string()});
    auto server = std::make_unique<ServerProcess>(HLOCACHE_BINARY, root_ / "store", args);
    EXPECT_TRUE(server->started()) << server->output();
    return server;
  }

  // Lines of the server's trace so far that hold `text`.
  size_t TraceLines(std::string_view text) const {
    std::ifstream in(trace_);
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) n += line.find(text) != std::string::npos;
    return n;
  }
  // Requests the server has answered on the quick path so far.
  size_t QuickAnswers() const { return TraceLines("answered on the quick path"); }
  // Waits (up to 10 s) for the trace to say `count` requests have ended; false if it did not.
  // A request's last send is traced after it returns, maybe after its client has the reply.
  bool AwaitRequestsEnded(size_t count) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (TraceLines("request ends: ") < count) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  std::string Put(ServerProcess& server, const std::string& key, size_t payload, uint64_t seed) {
    const std::string artifact = MakeArtifact(key, payload, seed);
    auto put = server.TierClient(artifact.size())
                   ->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
    EXPECT_TRUE(put && put->status == 201) << key;
    return artifact;
  }

  std::filesystem::path trace_;
};

TEST_F(QuickPathTest, RepliesAreTheLibrarysByteForByte) {
  auto server = Start();
  // Small: read from the store and copied into the reply. Large: from the memory tier, once the
  // first read has put it there, from the file's pages (splice).
  const std::string small_key = TestKey(1), large_key = TestKey(2);
  const std::string small = Put(*server, small_key, 4000, 1);
  const std::string large = Put(*server, large_key, 1 << 20, 2);
  ASSERT_EQ(
      Send(server->port(), Get("/v1/artifacts/" + large_key, "Host: x\r\n"), 1).replies.size(), 1u);
  // X-Library is a field the quick path does not take: the same request, answered by the library.
  const std::vector<std::string> field_sets = {
      "Host: x\r\n",
      "Host: x\r\nX-Hlocache-Namespace: torch-xla\r\n",
      "Host: 127.0.0.1\r\nUser-Agent: t/1\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate, br\r\n",
      "Accept: */*\r\nConnection: close\r\nHost: x\r\n",
  };
  // A miss too: the route's 404, which the quick path also answers (the store asked once).
  const std::string missing_key = TestKey(9);
  const std::string not_found = "error: no artifact " + missing_key + "\n";
  for (const auto& [key, artifact] : {std::pair{small_key, small}, std::pair{large_key, large},
                                      std::pair{missing_key, not_found}}) {
    for (const std::string& fields : field_sets) {
      const std::string path = "/v1/artifacts/" + key;
      // The library compresses a text reply (the 404's) to a request that accepts encodings,
      // so such a request is left to it unless the memory tier holds the body (an artifact is
      // never compressed; whether the store holds it is not asked twice).
      const bool encodings = fields.find("Accept-Encoding") != std::string::npos;
      const bool compressed = key == missing_key && encodings;
      const size_t quick_answers = encodings && key != large_key ? 0 : 1;
      const size_t before = QuickAnswers();
      const Exchange quick = Send(server->port(), Get(path, fields), 1);
      EXPECT_EQ(QuickAnswers(), before + quick_answers) << key << " " << fields;
      const Exchange library = Send(server->port(), Get(path, fields + "X-Library: 1\r\n"), 1);
      EXPECT_EQ(QuickAnswers(), before + quick_answers) << key << " " << fields;
      ASSERT_EQ(quick.replies.size(), 1u) << fields;
      ASSERT_EQ(library.replies.size(), 1u) << fields;
      EXPECT_EQ(quick.replies[0].substr(0, quick.replies[0].find("\r\n\r\n")),
                library.replies[0].substr(0, library.replies[0].find("\r\n\r\n")));
      EXPECT_TRUE(quick.replies[0] == library.replies[0]) << key << " " << fields;
      if (!compressed) {
        EXPECT_TRUE(BodyOf(quick.replies[0]) == artifact) << key << " " << fields;
      }
      const bool closes = fields.find("Connection: close") != std::string::npos;
      EXPECT_EQ(quick.closed, closes) << fields;
      EXPECT_EQ(library.closed, closes) << fields;
      // HEAD: answered from the catalog on the quick path unless a 404 would be compressed.
      const size_t before_head = QuickAnswers();
      const Exchange quick_head = Send(server->port(), Head(path, fields), 1, true);
      EXPECT_EQ(QuickAnswers(), before_head + (compressed ? 0 : 1)) << key << " " << fields;
      const Exchange library_head =
          Send(server->port(), Head(path, fields + "X-Library: 1\r\n"), 1, true);
      EXPECT_EQ(QuickAnswers(), before_head + (compressed ? 0 : 1)) << key << " " << fields;
      ASSERT_EQ(quick_head.replies.size(), 1u) << fields;
      ASSERT_EQ(library_head.replies.size(), 1u) << fields;
      EXPECT_EQ(quick_head.replies[0], library_head.replies[0]) << key << " " << fields;
      EXPECT_EQ(quick_head.closed, closes) << fields;
    }
  }
  // Each request read the store once, whichever path answered it: the store's own count of
  // misses is the requests for the missing key.
  auto stats = server->Client()->Get("/v1/stats");
  ASSERT_TRUE(stats && stats->status == 200);
  EXPECT_THAT(stats->body, HasSubstr("\n  \"misses\": 8,\n"));
  EXPECT_THAT(stats->body, HasSubstr("\n    \"misses\": 8,\n    \"puts\""));
  // A mount's misses are counted for its namespace, on both paths: a GET and a HEAD each way.
  auto metrics = server->Client()->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_THAT(metrics->body, HasSubstr("hlocache_file_requests_total{namespace=\"torch-xla\","
                                       "outcome=\"miss\"} 4\n"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// A large hit from the memory tier is copied into the socket from the tier's memory, unless
// --zero-copy asks for the pages of its file (splice). Either way, on the quick path and on the
// library's (a range), the bytes are the artifact's; the trace names the call that sent them.
TEST_F(QuickPathTest, MemoryHitsAreCopiedUnlessZeroCopyIsAsked) {
  for (const bool zero_copy : {false, true}) {
    SCOPED_TRACE(zero_copy ? "--zero-copy" : "the default");
    // Each request's sends are traced before its end: the count of ends tells when they are all
    // there. Those of an earlier server all are, since it stopped.
    size_t ended = TraceLines("request ends: ");
    auto server =
        Start(zero_copy ? std::vector<std::string>{"--zero-copy"} : std::vector<std::string>{});
    const std::string key = TestKey(zero_copy ? 21 : 20);
    const std::string artifact = Put(*server, key, 1 << 20, 20);
    ASSERT_TRUE(AwaitRequestsEnded(++ended));
    const std::string path = "/v1/artifacts/" + key;
    // The first read puts it in the tier.
    ASSERT_EQ(Send(server->port(), Get(path, "Host: x\r\n"), 1).replies.size(), 1u);
    ASSERT_TRUE(AwaitRequestsEnded(++ended));
    const size_t splices_before = TraceLines("splice: ");

    const size_t quick_answers = QuickAnswers();
    const Exchange quick = Send(server->port(), Get(path, "Host: x\r\n"), 1);
    ASSERT_EQ(quick.replies.size(), 1u);
    EXPECT_EQ(QuickAnswers(), quick_answers + 1) << "not on the quick path";
    EXPECT_TRUE(BodyOf(quick.replies[0]) == artifact);
    ASSERT_TRUE(AwaitRequestsEnded(++ended));
    const size_t quick_splices = TraceLines("splice: ") - splices_before;

    const Exchange range =
        Send(server->port(), Get(path, "Host: x\r\nRange: bytes=100000-999999\r\n"), 1);
    ASSERT_EQ(range.replies.size(), 1u);
    EXPECT_THAT(range.replies[0], StartsWith("HTTP/1.1 206 "));
    EXPECT_TRUE(BodyOf(range.replies[0]) == artifact.substr(100000, 900000));
    ASSERT_TRUE(AwaitRequestsEnded(++ended));
    const size_t range_splices = TraceLines("splice: ") - splices_before - quick_splices;

    if (zero_copy) {
      EXPECT_GT(quick_splices, 0u);
      EXPECT_GT(range_splices, 0u);
    } else {
      EXPECT_EQ(quick_splices, 0u);
      EXPECT_EQ(range_splices, 0u);
    }
    auto stats = server->Client()->Get("/v1/stats");
    ASSERT_TRUE(stats && stats->status == 200);
    EXPECT_THAT(stats->body, HasSubstr("\"memory_tier_hits\": 2,")) << "not sent from memory";
    EXPECT_EQ(server->Stop(), 0) << server->output();
  }
}

TEST_F(QuickPathTest, PipelinedRequestsOfBothPathsAreAnsweredInOrder) {
  auto server = Start();
  const std::string key = TestKey(3);
  const std::string artifact = Put(*server, key, 3000, 3);
  const std::string path = "/v1/artifacts/" + key;
  const size_t before = QuickAnswers();
  const Exchange e = Send(server->port(),
                          Get(path, "Host: x\r\n") +                               // quick
                              Get(path, "Host: x\r\nRange: bytes=0-9\r\n") +       // library
                              Get("/v1/artifacts/" + TestKey(4), "Host: x\r\n") +  // miss
                              Get("/v1/artifacts/not-a-key", "Host: x\r\n") +      // 400
                              Get(path, "Host: x\r\nConnection: close\r\n") +      // quick, last
                              Get(path, "Host: x\r\n"),                            // never read
                          6);
  ASSERT_EQ(e.replies.size(), 5u);
  EXPECT_THAT(e.replies[0], StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(BodyOf(e.replies[0]) == artifact);
  EXPECT_THAT(e.replies[1], StartsWith("HTTP/1.1 206 "));
  EXPECT_EQ(BodyOf(e.replies[1]), artifact.substr(0, 10));
  EXPECT_THAT(e.replies[2], StartsWith("HTTP/1.1 404 "));
  EXPECT_THAT(e.replies[3], StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(e.replies[4], StartsWith("HTTP/1.1 200 OK\r\nConnection: close\r\n"));
  EXPECT_TRUE(BodyOf(e.replies[4]) == artifact);
  EXPECT_TRUE(e.closed);
  EXPECT_EQ(QuickAnswers(), before + 3);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// A connection carries at most 1,000 requests (the server's keep-alive bound): the last reply
// says so and the connection closes, on either path.
TEST_F(QuickPathTest, TheLastRequestAConnectionMayCarrySaysItCloses) {
  auto server = Start();
  const std::string key = TestKey(12);
  const std::string artifact = Put(*server, key, 500, 12);
  std::string requests;
  for (int i = 0; i < 1001; ++i) requests += Get("/v1/artifacts/" + key, "Host: x\r\n");
  const size_t before = QuickAnswers();
  const Exchange e = Send(server->port(), requests, 1001);
  ASSERT_EQ(e.replies.size(), 1000u);
  EXPECT_TRUE(e.closed);
  for (size_t i = 0; i < e.replies.size(); ++i) {
    const bool last = i + 1 == e.replies.size();
    EXPECT_EQ(e.replies[i].find("Connection: close\r\n") != std::string::npos, last) << i;
    EXPECT_EQ(e.replies[i].find("Keep-Alive: ") != std::string::npos, !last) << i;
    EXPECT_TRUE(BodyOf(e.replies[i]) == artifact) << i;
  }
  // Most on the quick path (a head split by the read buffer's end is the library's).
  EXPECT_GT(QuickAnswers(), before + 900);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(QuickPathTest, HitsAndMissesAreCountedAndLoggedAsTheLibrarysAre) {
  auto server = Start();
  const std::string quick_key = TestKey(5), library_key = TestKey(6);
  const std::string quick_missing = TestKey(10), library_missing = TestKey(11);
  Put(*server, quick_key, 2000, 5);
  Put(*server, library_key, 2000, 6);
  const size_t before = QuickAnswers();
  auto get = [&](const std::string& key, const std::string& fields) {
    const Exchange e = Send(server->port(), Get("/v1/artifacts/" + key, fields), 1);
    ASSERT_EQ(e.replies.size(), 1u) << key;
  };
  for (int i = 0; i < 7; ++i) {
    get(quick_key, "Host: x\r\n");
    get(library_key, "Host: x\r\nX-Library: 1\r\n");
  }
  for (int i = 0; i < 3; ++i) {
    get(quick_missing, "Host: x\r\n");
    get(library_missing, "Host: x\r\nX-Library: 1\r\n");
  }
  // And HEADs, twice each on each path, of a stored key and a missing one.
  auto head = [&](const std::string& key, const std::string& fields) {
    const Exchange e = Send(server->port(), Head("/v1/artifacts/" + key, fields), 1, true);
    ASSERT_EQ(e.replies.size(), 1u) << key;
  };
  for (int i = 0; i < 2; ++i) {
    head(quick_key, "Host: x\r\n");
    head(library_key, "Host: x\r\nX-Library: 1\r\n");
    head(quick_missing, "Host: x\r\n");
    head(library_missing, "Host: x\r\nX-Library: 1\r\n");
  }
  EXPECT_EQ(QuickAnswers(), before + 14);
  const std::string metrics = server->SettledMetrics();
  ASSERT_FALSE(metrics.empty());
  EXPECT_THAT(
      metrics,
      HasSubstr("\nhlocache_http_requests_total{route=\"artifact_get\",status=\"200\"} 14\n"));
  EXPECT_THAT(
      metrics,
      HasSubstr("\nhlocache_http_requests_total{route=\"artifact_get\",status=\"404\"} 6\n"));
  EXPECT_THAT(metrics, HasSubstr("\nhlocache_hits_total 14\n"));
  EXPECT_THAT(metrics, HasSubstr("\nhlocache_misses_total 6\n"));
  // Every request has its line, the same for both paths but for the time taken.
  std::ifstream log(root_ / "access.log");
  std::stringstream read;
  read << log.rdbuf();
  const std::string text = read.str();
  std::string method = "GET";
  auto lines = [&](const std::string& key, const std::string& status_and_bytes) {
    const std::string line =
        "\"" + method + " /v1/artifacts/" + key + "\" " + status_and_bytes + " ";
    size_t n = 0;
    for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(lines(quick_key, "200 " + std::to_string(MakeArtifact(quick_key, 2000, 5).size())), 7u)
      << text;
  EXPECT_EQ(lines(library_key, "200 " + std::to_string(MakeArtifact(library_key, 2000, 6).size())),
            7u);
  const std::string not_found = "error: no artifact " + quick_missing + "\n";
  EXPECT_EQ(lines(quick_missing, "404 " + std::to_string(not_found.size())), 3u) << text;
  EXPECT_EQ(lines(library_missing, "404 " + std::to_string(not_found.size())), 3u);
  // A HEAD is logged with the body the library holds: none for a hit, the error text for a 404.
  method = "HEAD";
  for (const std::string& key : {quick_key, library_key}) EXPECT_EQ(lines(key, "200 0"), 2u);
  EXPECT_EQ(lines(quick_missing, "404 " + std::to_string(not_found.size())), 2u) << text;
  EXPECT_EQ(lines(library_missing, "404 " + std::to_string(not_found.size())), 2u);
  EXPECT_THAT(
      metrics,
      HasSubstr("\nhlocache_http_requests_total{route=\"artifact_head\",status=\"200\"} 4\n"));
  EXPECT_THAT(
      metrics,
      HasSubstr("\nhlocache_http_requests_total{route=\"artifact_head\",status=\"404\"} 4\n"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(QuickPathTest, TokensAreCheckedAsTheLibraryChecksThem) {
  const auto tokens = root_ / "tokens";
  std::ofstream(tokens) << "read reader-token\nwrite writer-token\n";
  auto server = Start({"--tokens", tokens.string()});
  const std::string key = TestKey(7);
  const std::string artifact = MakeArtifact(key, 1500, 7);
  auto put = server->Client("writer-token")
                 ->Put(("/v1/artifacts/" + key).c_str(), artifact, "application/octet-stream");
  ASSERT_TRUE(put && put->status == 201);
  const std::string path = "/v1/artifacts/" + key;
  const size_t before = QuickAnswers();
  auto status = [&](const std::string& fields) {
    const Exchange e = Send(server->port(), Get(path, fields), 1);
    return e.replies.empty() ? -1 : std::stoi(e.replies[0].substr(9, 3));
  };
  EXPECT_EQ(status("Host: x\r\n"), 401);
  EXPECT_EQ(status("Host: x\r\nAuthorization: Bearer wrong\r\n"), 401);
  EXPECT_EQ(QuickAnswers(), before);
  EXPECT_EQ(status("Host: x\r\nAuthorization: Bearer reader-token\r\n"), 200);
  EXPECT_EQ(status("Host: x\r\nAuthorization: Bearer writer-token\r\n"), 200);
  EXPECT_EQ(QuickAnswers(), before + 2);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

}  // namespace
}  // namespace hlocache::testing
