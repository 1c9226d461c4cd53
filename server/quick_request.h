// Recognizes, in the bytes buffered on a connection, a request the plain server may answer on its
// quick path (QuickRequest in server/connection.h): the kind that makes up nearly every hit.
//
// Deliberately narrow, and stricter than HeaderCheck: `GET` or `HEAD`, a path of [A-Za-z0-9/._-]
// (nothing to decode), `HTTP/1.1`, lines ended by CRLF, and only the field lines Host,
// User-Agent, Accept, Accept-Encoding, Authorization, X-Hlocache-Namespace and
// `Connection: close`, each at most once, each `Name:` then optional spaces then a value of
// visible characters and inner spaces. Any other head, however
// valid, is not recognized and goes to the library, which answers it as it always did: the quick
// path never has to agree with the library on anything but these.
//
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace hlocache::server {

struct QuickHead {
  size_t length = 0;                // Bytes of the head, its empty line included.
  bool head_only = false;           // HEAD rather than GET.
  std::string_view path;            // Views into the bytes given.
  std::string_view authorization;   // Empty when there is no such field.
  bool close = false;               // `Connection: close`: the last request on the connection.
  bool accept_encoding = false;     // An Accept-Encoding field: the library may compress text.
  std::string_view file_namespace;  // X-Hlocache-Namespace (a mount's); empty when absent.
};

// The longest head recognized; a longer one is the library's.
inline constexpr size_t kMostQuickHeadBytes = 4096;

// The head at the start of `bytes`, when it has all arrived and is one the quick path takes.
std::optional<QuickHead> ParseQuickHead(std::string_view bytes);

}  // namespace hlocache::server
