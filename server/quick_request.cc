#include "server/quick_request.h"

#include <array>

namespace hlocache::server {
namespace {

constexpr std::string_view kGet = "GET ";
constexpr std::string_view kHead = "HEAD ";
constexpr std::string_view kVersion = " HTTP/1.1\r\n";

bool IsPathChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
         c == '.' || c == '_' || c == '-';
}

// The field names taken, lowercase; the index is the field's bit in a set of those seen.
constexpr std::array<std::string_view, 7> kFields = {
    "host",       "user-agent",          "accept", "accept-encoding", "authorization",
    "connection", "x-hlocache-namespace"};
constexpr size_t kAcceptEncoding = 3;
constexpr size_t kAuthorization = 4;
constexpr size_t kConnection = 5;
constexpr size_t kNamespace = 6;

// The index in kFields of `name`, compared without case; kFields.size() when it is none.
size_t FieldIndex(std::string_view name) {
  for (size_t f = 0; f < kFields.size(); ++f) {
    const std::string_view want = kFields[f];
    if (want.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = (static_cast<unsigned char>(name[i]) | 0x20) == static_cast<unsigned char>(want[i]);
    }
    if (same) return f;
  }
  return kFields.size();
}

}  // namespace

std::optional<QuickHead> ParseQuickHead(std::string_view bytes) {
  if (bytes.size() > kMostQuickHeadBytes) bytes = bytes.substr(0, kMostQuickHeadBytes);
  QuickHead head;
  size_t at = 0;
  if (bytes.starts_with(kGet)) {
    at = kGet.size();
  } else if (bytes.starts_with(kHead)) {
    at = kHead.size();
    head.head_only = true;
  } else {
    return std::nullopt;
  }
  const size_t path_begin = at;
  if (at >= bytes.size() || bytes[at] != '/') return std::nullopt;
  while (at < bytes.size() && IsPathChar(static_cast<unsigned char>(bytes[at]))) ++at;
  head.path = bytes.substr(path_begin, at - path_begin);
  if (bytes.substr(at, kVersion.size()) != kVersion) return std::nullopt;
  at += kVersion.size();
  unsigned seen = 0;
  while (true) {
    if (bytes.substr(at, 2) == "\r\n") {
      head.length = at + 2;
      return head;
    }
    // Name: letters and '-' (every field taken is spelled so), up to the colon.
    const size_t name_begin = at;
    while (at < bytes.size() && (((static_cast<unsigned char>(bytes[at]) | 0x20) >= 'a' &&
                                  (static_cast<unsigned char>(bytes[at]) | 0x20) <= 'z') ||
                                 bytes[at] == '-')) {
      ++at;
    }
    if (at >= bytes.size() || bytes[at] != ':') return std::nullopt;
    const size_t field = FieldIndex(bytes.substr(name_begin, at - name_begin));
    if (field == kFields.size() || (seen & (1u << field)) != 0) return std::nullopt;
    seen |= 1u << field;
    ++at;
    while (at < bytes.size() && bytes[at] == ' ') ++at;
    // Value: visible characters with spaces between them, nothing trailing (where a parser
    // might trim and another not).
    const size_t value_begin = at;
    while (at < bytes.size() && bytes[at] >= ' ' && bytes[at] <= '~') ++at;
    if (bytes.substr(at, 2) != "\r\n") return std::nullopt;
    const std::string_view value = bytes.substr(value_begin, at - value_begin);
    if (!value.empty() && value.back() == ' ') return std::nullopt;
    if (field == kAuthorization) {
      if (value.empty()) return std::nullopt;
      head.authorization = value;
    }
    if (field == kAcceptEncoding) head.accept_encoding = true;
    if (field == kNamespace) head.file_namespace = value;
    if (field == kConnection) {
      // Spelled as the library compares it; any other value may mean something else to it.
      if (value != "close") return std::nullopt;
      head.close = true;
    }
    at += 2;
  }
}

}  // namespace hlocache::server
