#include "server/quick_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/header_check.h"

namespace hlocache::server {
namespace {

const std::string kPath = "/v1/artifacts/v1-0123456789abcdef0123456789abcdef";

TEST(QuickRequestTest, TakesTheHeadsClientsSendForAHit) {
  // wrk's, curl's and hlocache's own (cpp-httplib's, which closes the connection after it).
  for (const std::string& fields :
       {std::string("Host: 127.0.0.1:8080\r\n"),
        std::string("Host: h\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n"),
        std::string("Accept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: close\r\n"
                    "Host: 10.0.0.1:7177\r\nUser-Agent: cpp-httplib/0.11\r\n"),
        std::string("host: h\r\nAUTHORIZATION:Bearer abc\r\n"), std::string()}) {
    const std::string head = "GET " + kPath + " HTTP/1.1\r\n" + fields + "\r\n";
    const std::string bytes = head + "GET /next";  // A pipelined request follows.
    const auto parsed = ParseQuickHead(bytes);
    ASSERT_TRUE(parsed.has_value()) << head;
    EXPECT_EQ(parsed->length, head.size());
    EXPECT_EQ(parsed->path, kPath);
    EXPECT_EQ(parsed->close, fields.find("Connection: close") != std::string::npos);
  }
  const auto with_token =
      ParseQuickHead("GET / HTTP/1.1\r\nAuthorization:   Bearer t0k en\r\n\r\n");
  ASSERT_TRUE(with_token.has_value());
  EXPECT_EQ(with_token->authorization, "Bearer t0k en");
  EXPECT_EQ(with_token->path, "/");
  EXPECT_FALSE(with_token->head_only);
  EXPECT_TRUE(with_token->file_namespace.empty());
  // A mount's HEAD (its stat of a file) names its namespace.
  const std::string mount_bytes = "HEAD " + kPath +
                                  " HTTP/1.1\r\nX-Hlocache-Namespace: torch-xla\r\n"
                                  "Accept-Encoding: gzip\r\n\r\n";
  const auto mount_head = ParseQuickHead(mount_bytes);
  ASSERT_TRUE(mount_head.has_value());
  EXPECT_TRUE(mount_head->head_only);
  EXPECT_EQ(mount_head->path, kPath);
  EXPECT_EQ(mount_head->file_namespace, "torch-xla");
  EXPECT_TRUE(mount_head->accept_encoding);
}

TEST(QuickRequestTest, LeavesEverythingElseToTheLibrary) {
  const std::string line = "GET " + kPath + " HTTP/1.1\r\n";
  for (const std::string& head : std::vector<std::string>{
           "PUT " + kPath + " HTTP/1.1\r\n\r\n",
           "DELETE " + kPath + " HTTP/1.1\r\n\r\n",
           "OPTIONS " + kPath + " HTTP/1.1\r\n\r\n",
           "get " + kPath + " HTTP/1.1\r\n\r\n",
           "GET " + kPath + " HTTP/1.0\r\n\r\n",
           "GET " + kPath + "?x=1 HTTP/1.1\r\n\r\n",
           std::string("GET /v1/artifacts/v1-%30 HTTP/1.1\r\n\r\n"),
           std::string("GET v1/artifacts HTTP/1.1\r\n\r\n"),
           "GET  " + kPath + " HTTP/1.1\r\n\r\n",
           line + "Range: bytes=0-1\r\n\r\n",
           line + "If-None-Match: x\r\n\r\n",
           line + "Content-Length: 0\r\n\r\n",
           line + "Transfer-Encoding: chunked\r\n\r\n",
           line + "Expect: 100-continue\r\n\r\n",
           line + "Connection: keep-alive\r\n\r\n",
           line + "Connection: Close\r\n\r\n",
           line + "Host: a\r\nHost: b\r\n\r\n",                    // Twice.
           line + "Host : a\r\n\r\n",                              // Space before the colon.
           line + "Host: a \r\n\r\n",                              // Trailing space.
           line + "Host: a\tb\r\n\r\n",                            // A tab.
           line + "Host: \x80\r\n\r\n",                            // Not ASCII.
           line + "Host: a\r\n  folded\r\n\r\n",                   // Obsolete folding.
           line + "Host: a\n\r\n",                                 // A bare LF.
           line + "Authorization:\r\n\r\n",                        // An empty credential.
           line + "Host: a\r\n",                                   // Not all here yet.
           line + "Host: " + std::string(5000, 'a') + "\r\n\r\n",  // Too long.
       }) {
    EXPECT_FALSE(ParseQuickHead(head).has_value()) << head;
  }
}

TEST(QuickRequestTest, NoPrefixOfAHeadIsTaken) {
  const std::string head = "GET " + kPath + " HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_FALSE(ParseQuickHead(head.substr(0, n)).has_value()) << n;
  }
  EXPECT_TRUE(ParseQuickHead(head).has_value());
}

// Every head taken is one HeaderCheck passes, and is taken whole: thousands of random edits of
// heads clients send (bytes replaced, inserted, deleted, from the characters that matter).
TEST(QuickRequestTest, WhatItTakesHeaderCheckPasses) {
  const std::vector<std::string> seeds = {
      "GET " + kPath + " HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: close\r\nAuthorization: Bearer x\r\n\r\n",
  };
  const std::string alphabet = "GET /:\r\n \tHTP1.aZ-_%?\x01\x7f\x80";
  std::mt19937 random(7);
  size_t taken = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string head = seeds[round % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % head.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0:
          head[at] = c;
          break;
        case 1:
          head.insert(head.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          head.erase(at, 1);
          break;
      }
      if (head.empty()) head = "G";
    }
    const auto parsed = ParseQuickHead(head);
    if (!parsed) continue;
    ++taken;
    ASSERT_LE(parsed->length, head.size());
    HeaderCheck check;
    check.Reset();
    EXPECT_FALSE(check.Feed(head.substr(0, parsed->length)).has_value()) << head;
    EXPECT_TRUE(check.done()) << head;
    EXPECT_EQ(head.compare(parsed->length - 4, 4, "\r\n\r\n"), 0) << head;
  }
  EXPECT_GT(taken, 100u);  // The edits left many heads a client could send.
}

}  // namespace
}  // namespace hlocache::server
