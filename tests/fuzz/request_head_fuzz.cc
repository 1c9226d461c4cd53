// libFuzzer target: any bytes as the head of a request, through the two checks the server makes
// of a request before the HTTP library sees it.
//
// - HeaderCheck (server/header_check.h) sees a head in whatever pieces the socket delivers: fed
//   the same bytes whole and in pieces (their sizes drawn from the input's first byte), it must
//   refuse the same, for the same reason, or accept the same.
// - ParseQuickHead (server/quick_request.h) decides which heads the quick path answers, and it
//   must never take one HeaderCheck refuses: the head it takes must pass HeaderCheck and end
//   exactly at the first empty line; its fields must be the ones a plain reading of the head's
//   lines gives (an oracle written here, line by line, independently of its scanner); no
//   proper prefix of the head may be taken (it has not all arrived); and what follows the head
//   (a pipelined request) must not change what it takes.
//
// The head is given as a view of the fuzzer's own buffer, so that a read past its end is an
// AddressSanitizer report. Any disagreement aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/header_check.h"
#include "server/quick_request.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using hlocache::server::HeaderCheck;
using hlocache::server::kMostQuickHeadBytes;
using hlocache::server::ParseQuickHead;
using hlocache::server::QuickHead;

using hlocache::fuzzing::Check;

struct Outcome {
  std::optional<HeaderCheck::Refusal> refusal;
  bool done = false;
};

// Fed in pieces of 1 to 16 bytes, sizes from a generator seeded with `seed`; seed 0 feeds whole.
Outcome RunHeaderCheck(std::string_view bytes, uint8_t seed) {
  HeaderCheck check;
  Outcome out;
  hlocache::fuzzing::FeedInPieces(bytes, seed, 16, [&](std::string_view piece) {
    out.refusal = check.Feed(piece);
    return !out.refusal;
  });
  out.done = check.done();
  return out;
}

bool SameOutcome(const Outcome& a, const Outcome& b) {
  if (a.refusal.has_value() != b.refusal.has_value()) return false;
  if (a.refusal) {
    return a.refusal->status == b.refusal->status && a.refusal->reason == b.refusal->reason;
  }
  return a.done == b.done;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool Within(std::string_view inner, std::string_view outer) {
  return inner.empty() || (inner.data() >= outer.data() &&
                           inner.data() + inner.size() <= outer.data() + outer.size());
}

// What a taken head says, read line by line: the request line's method and path, and the
// fields the quick path reports.
void CheckFieldsAgainstLines(std::string_view head, const QuickHead& quick) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < head.size()) {
    const size_t end = head.find("\r\n", at);
    Check(end != std::string_view::npos);
    lines.push_back(head.substr(at, end - at));
    at = end + 2;
  }
  // The request line, the field lines, and the empty line that ends the head (and is the only
  // empty one).
  Check(lines.size() >= 2 && lines.back().empty());
  lines.pop_back();
  for (std::string_view line : lines) Check(!line.empty());

  const std::string_view request_line = lines.front();
  const std::string_view method = quick.head_only ? "HEAD" : "GET";
  Check(request_line == std::string(method) + " " + std::string(quick.path) + " HTTP/1.1");
  Check(!quick.path.empty() && quick.path.front() == '/');
  for (const char c : quick.path) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '/' || c == '.' || c == '_' || c == '-';
    Check(plain);
  }

  bool close = false, accept_encoding = false;
  std::string_view authorization, file_namespace;
  std::vector<std::string> names;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t colon = line.find(':');
    Check(colon != std::string_view::npos && colon > 0);
    const std::string name = Lower(line.substr(0, colon));
    for (const std::string& seen : names) Check(seen != name);  // Each field at most once.
    names.push_back(name);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    Check(value.empty() || value.back() != ' ');
    for (const char c : value) Check(c >= ' ' && c <= '~');
    if (name == "connection") {
      Check(value == "close");
      close = true;
    } else if (name == "authorization") {
      Check(!value.empty());
      authorization = value;
    } else if (name == "accept-encoding") {
      accept_encoding = true;
    } else if (name == "x-hlocache-namespace") {
      file_namespace = value;
    } else {
      Check(name == "host" || name == "user-agent" || name == "accept");
    }
  }
  Check(quick.close == close);
  Check(quick.accept_encoding == accept_encoding);
  Check(quick.authorization == authorization);
  Check(quick.file_namespace == file_namespace);
}

bool SameHead(const QuickHead& a, const QuickHead& b) {
  return a.length == b.length && a.head_only == b.head_only && a.path == b.path &&
         a.authorization == b.authorization && a.close == b.close &&
         a.accept_encoding == b.accept_encoding && a.file_namespace == b.file_namespace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t seed = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  Check(SameOutcome(RunHeaderCheck(bytes, 0), RunHeaderCheck(bytes, seed == 0 ? 1 : seed)));

  const std::optional<QuickHead> quick = ParseQuickHead(bytes);
  if (!quick) return 0;
  const size_t length = quick->length;
  Check(length >= 4 && length <= bytes.size() && length <= kMostQuickHeadBytes);
  const std::string_view head = bytes.substr(0, length);
  Check(bytes.find("\r\n\r\n") == length - 4);
  Check(Within(quick->path, head) && Within(quick->authorization, head) &&
        Within(quick->file_namespace, head));

  // The server's own check takes it, and finds its end where the quick path did.
  const Outcome checked = RunHeaderCheck(head, seed);
  Check(!checked.refusal && checked.done);

  CheckFieldsAgainstLines(head, *quick);

  // Taken the same with nothing after it; not taken before it has all arrived.
  const std::optional<QuickHead> alone = ParseQuickHead(head);
  Check(alone.has_value() && SameHead(*alone, *quick));
  const size_t prefix = (static_cast<size_t>(seed) * 2654435761u) % length;
  Check(!ParseQuickHead(head.substr(0, prefix)).has_value());
  Check(!ParseQuickHead(head.substr(0, length - 1)).has_value());
  return 0;
}
