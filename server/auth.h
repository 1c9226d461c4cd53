// Bearer-token access control for the server.
//
// A tokens file has one token per line, `ROLE TOKEN`, where ROLE is read, write or admin; blank
// lines and lines starting with '#' are skipped. Roles are ordered: write includes read, admin
// includes write. What each route needs is in server/routes.h (RequiredRole).
//
// Tokens are kept only as SHA-256 digests, and a presented token is compared with every
// digest in constant time (CRYPTO_memcmp, no early exit), so neither the comparison's timing nor
// a memory dump of the server reveals a token. Nothing here logs a token.
//
// Thread safety: a TokenTable is immutable after Load; Authorize may be called from any thread.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hlocache::server {

enum class Role { kNone = 0, kRead = 1, kWrite = 2, kAdmin = 3 };

std::string_view RoleName(Role role);

class TokenTable {
 public:
  // kNotFound or kPermissionDenied when the file cannot be read; kInvalidArgument naming
  // file:line for a malformed line, an unknown role or an empty table.
  static Result<TokenTable> Load(const std::filesystem::path& path);
  // From text, for tests; `name` is used in error messages.
  static Result<TokenTable> Parse(std::string_view text, std::string_view name);

  // The role of the token in an `Authorization` header value ("Bearer TOKEN"); kNone when the
  // header is missing, malformed, or names no known token.
  Role Authorize(std::string_view authorization_header) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::array<unsigned char, 32> digest;
    Role role;
  };
  std::vector<Entry> entries_;
};

}  // namespace hlocache::server
