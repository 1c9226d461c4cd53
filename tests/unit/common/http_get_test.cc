// HttpGetter against a real HTTP server on a loopback socket.
#include "common/http_get.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/unit/status_matchers.h"

namespace hlocache {
namespace {

using ::testing::HasSubstr;

// Bytes no two positions of which repeat with a short period, so a reordered piece shows.
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

class HttpGetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    body_ = Pattern(3 * HttpGetter::kReceiveBufferBytes + 12345);
    server_.Get("/body", [&](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      res.set_content(body_, "application/octet-stream");
    });
    server_.Get("/missing", [&](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      res.status = 404;
      res.set_content("no such thing", "text/plain");
    });
    server_.Get("/echo", [&](const httplib::Request& req, httplib::Response& res) {
      Note(req);
      res.set_content(req.get_header_value("Authorization") + "|" +
                          req.get_header_value("X-Hlocache-Namespace") + "|" +
                          req.get_param_value("prefix"),
                      "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([&] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void Note(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    client_ports_.insert(req.remote_port);
  }
  size_t Connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return client_ports_.size();
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::string body_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::set<int> client_ports_;
};

TEST_F(HttpGetTest, ABodyArrivesWholeInOrderInPiecesAfterItsStatusAndLength) {
  HttpGetter getter(Url(), {});
  int started_status = 0;
  std::optional<uint64_t> length;
  std::string got;
  int pieces = 0;
  auto status = getter.Get(
      "/body",
      [&](int s, std::optional<uint64_t> n) {
        EXPECT_TRUE(got.empty()) << "the body came before its headers";
        started_status = s;
        length = n;
        return true;
      },
      [&](std::string_view bytes) {
        got.append(bytes);
        ++pieces;
        return true;
      });
  ASSERT_THAT(status, IsOk());
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(started_status, 200);
  EXPECT_EQ(length, body_.size());
  EXPECT_EQ(got, body_);
  EXPECT_GT(pieces, 1);
}

TEST_F(HttpGetTest, AStatusOtherThanOkIsReturnedWithItsBody) {
  HttpGetter getter(Url(), {});
  auto whole = getter.GetWhole("/missing");
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(whole->first, 404);
  EXPECT_EQ(whole->second, "no such thing");
}

TEST_F(HttpGetTest, StoppingAtTheHeadersOrMidBodyReturnsTheStatusNotAnError) {
  HttpGetter getter(Url(), {});
  size_t received = 0;
  auto at_headers = getter.Get(
      "/body", [](int, std::optional<uint64_t>) { return false; },
      [&](std::string_view bytes) {
        received += bytes.size();
        return true;
      });
  ASSERT_THAT(at_headers, IsOk());
  EXPECT_EQ(*at_headers, 200);
  EXPECT_EQ(received, 0u);

  auto mid_body = getter.Get(
      "/body", [](int, std::optional<uint64_t>) { return true; },
      [&](std::string_view bytes) {
        received += bytes.size();
        return false;
      });
  ASSERT_THAT(mid_body, IsOk());
  EXPECT_EQ(*mid_body, 200);
  EXPECT_GT(received, 0u);
  EXPECT_LT(received, body_.size());

  // The getter is still usable afterwards.
  auto again = getter.GetWhole("/body");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->second, body_);
}

TEST_F(HttpGetTest, HeadGivesTheStatusAndTheLengthWithoutTheBody) {
  HttpGetter getter(Url(), {});
  auto head = getter.Head("/body");
  ASSERT_THAT(head, IsOk());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->content_length, body_.size());
  auto missing = getter.Head("/missing");
  ASSERT_THAT(missing, IsOk());
  EXPECT_EQ(missing->status, 404);
}

TEST_F(HttpGetTest, TheTokenAndTheHeadersGoWithEveryRequest) {
  HttpGetOptions options;
  options.bearer_token = "s3cret";
  options.headers.emplace_back("X-Hlocache-Namespace", "jax");
  HttpGetter getter(Url(), options);
  auto whole = getter.GetWhole("/echo?prefix=a%2Fb");
  ASSERT_THAT(whole, IsOk());
  EXPECT_EQ(whole->second, "Bearer s3cret|jax|a/b");
}

TEST_F(HttpGetTest, APoolReusesAConnectionWithinABurstButNotAfterAPause) {
  HttpGetterPool pool(Url(), {});
  for (int i = 0; i < 3; ++i) {
    auto getter = pool.Take();
    ASSERT_THAT(getter->Head("/body"), IsOk());
    pool.GiveBack(std::move(getter));
  }
  EXPECT_EQ(Connections(), 1u);
  std::this_thread::sleep_for(HttpGetterPool::kMostIdle + std::chrono::milliseconds(100));
  auto getter = pool.Take();
  ASSERT_THAT(getter->Head("/body"), IsOk());
  EXPECT_EQ(Connections(), 2u);
}

TEST_F(HttpGetTest, ACallerHoldingAGetterMakesTheNextCallerConnectAnew) {
  HttpGetterPool pool(Url(), {});
  auto first = pool.Take();
  auto second = pool.Take();
  ASSERT_THAT(first->Head("/body"), IsOk());
  ASSERT_THAT(second->Head("/body"), IsOk());
  EXPECT_EQ(Connections(), 2u);
}

TEST(HttpGetNoServerTest, NobodyListeningIsUnavailableAndNamesTheUrl) {
  // A port that was just free: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  HttpGetter getter(url, {});
  EXPECT_THAT(getter.Head("/x"), StatusIs(StatusCode::kUnavailable, HasSubstr(url + "/x")));
}

TEST(HttpGetNoServerTest, AServerThatNeverAnswersIsLeftAfterTheStallTimeout) {
  // Accepts (the kernel completes the handshake of a listening socket) and never reads.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  HttpGetOptions options;
  options.stall_timeout = std::chrono::milliseconds(1000);
  HttpGetter getter("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), options);
  const auto start = std::chrono::steady_clock::now();
  auto got = getter.GetWhole("/x");
  const auto waited = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_THAT(got, StatusIs(StatusCode::kUnavailable));
  // Bounded: it gave up rather than waiting for TCP to give up (minutes).
  EXPECT_LT(waited, std::chrono::seconds(30));
}

}  // namespace
}  // namespace hlocache
