#include "server/header_check.h"

namespace hlocache::server {
namespace {

// RFC 9110's tchar: what a field name may hold.
bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

}  // namespace

void HeaderCheck::Reset() {
  line_.clear();
  lines_ = 0;
  head_bytes_ = 0;
  done_ = false;
  refused_ = false;
}

std::optional<HeaderCheck::Refusal> HeaderCheck::Feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (done_ || refused_) return std::nullopt;
    if (++head_bytes_ > kMostHeadBytes) {
      refused_ = true;
      return Refusal{431, "the request's head is longer than " +
                              std::to_string(kMostHeadBytes / 1024) + " KiB"};
    }
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    auto refusal = CheckLine(line_);
    line_.clear();
    if (refusal) {
      refused_ = true;
      return refusal;
    }
  }
  return std::nullopt;
}

std::optional<HeaderCheck::Refusal> HeaderCheck::CheckLine(std::string_view line) {
  if (lines_++ == 0) return std::nullopt;  // The request line: the library's to check.
  if (line.empty()) {
    done_ = true;
    return std::nullopt;
  }
  if (lines_ - 1 > kMostFieldLines) {
    return Refusal{431, "more than " + std::to_string(kMostFieldLines) + " header lines"};
  }
  if (line.front() == ' ' || line.front() == '\t') {
    return Refusal{400, "a header line continues the one before it (obsolete line folding)"};
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Refusal{400, "a header line without a colon"};
  if (colon == 0) return Refusal{400, "a header line with an empty name"};
  for (size_t i = 0; i < colon; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (IsTokenChar(c)) continue;
    if (c == ' ' || c == '\t') {
      return Refusal{400, "whitespace between a header's name and its colon"};
    }
    return Refusal{400, "a header name with a character a name may not hold"};
  }
  return std::nullopt;
}

}  // namespace hlocache::server
