#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/file.h"

namespace hlocache::server {
namespace {

std::array<unsigned char, 32> Sha256(std::string_view text) {
  std::array<unsigned char, 32> out{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), out.data(), &length, EVP_sha256(), nullptr);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kNone:
      return "none";
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kAdmin:
      return "admin";
  }
  return "none";
}

Result<TokenTable> TokenTable::Load(const std::filesystem::path& path) {
  HLOCACHE_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return Parse(text, path.string());
}

Result<TokenTable> TokenTable::Parse(std::string_view text, std::string_view name) {
  TokenTable table;
  int line_number = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = Trim(text.substr(0, eol));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = std::string(name) + ":" + std::to_string(line_number) + ": ";
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      return Error(InvalidArgument(where + "expected 'ROLE TOKEN'"));
    }
    const std::string_view role_text = line.substr(0, space);
    const std::string_view token = Trim(line.substr(space));
    Role role;
    if (role_text == "read") {
      role = Role::kRead;
    } else if (role_text == "write") {
      role = Role::kWrite;
    } else if (role_text == "admin") {
      role = Role::kAdmin;
    } else {
      return Error(InvalidArgument(where + "unknown role '" + std::string(role_text) +
                                   "' (read, write or admin)"));
    }
    if (token.size() < 8 || token.find_first_of(" \t") != std::string_view::npos) {
      return Error(InvalidArgument(where + "a token is one word of at least 8 characters"));
    }
    table.entries_.push_back({Sha256(token), role});
  }
  if (table.entries_.empty()) {
    return Error(InvalidArgument(std::string(name) + ": no tokens"));
  }
  return table;
}

Role TokenTable::Authorize(std::string_view header) const {
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() <= kScheme.size() || header.substr(0, kScheme.size()) != kScheme) {
    return Role::kNone;
  }
  const auto digest = Sha256(Trim(header.substr(kScheme.size())));
  Role found = Role::kNone;
  // Every entry is compared, whatever matched before, so the time taken says nothing about
  // which entry (if any) matched.
  for (const Entry& e : entries_) {
    const bool equal = CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0;
    if (equal && e.role > found) found = e.role;
  }
  return found;
}

}  // namespace hlocache::server
