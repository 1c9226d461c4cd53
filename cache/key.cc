#include "cache/key.h"

#include <algorithm>
#include <array>

#include "common/fast_hash.h"

namespace hlocache::cache {
namespace {

constexpr std::string_view kDomainTag = "hlocache-key-v1";
constexpr std::string_view kFileDomainTag = "hlocache-file-v1";

void AppendLengthPrefixed(std::string& buf, std::string_view part) {
  const uint64_t n = part.size();
  for (int i = 0; i < 8; ++i) buf += static_cast<char>((n >> (8 * i)) & 0xff);
  buf.append(part);
}

// A part's length, as eight little-endian bytes: what comes before the part's bytes.
void UpdateLength(XXH3_state_t* state, uint64_t n) {
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  XXH3_128bits_update(state, len, sizeof len);
}

void UpdateLengthPrefixed(XXH3_state_t* state, std::string_view part) {
  UpdateLength(state, part.size());
  XXH3_128bits_update(state, part.data(), part.size());
}

Hash128 FromXxh(XXH128_hash_t h) { return Hash128{h.high64, h.low64}; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '/';
}

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > 128 || !std::all_of(name.begin(), name.end(), IsNameChar)) {
    return InvalidArgument(std::string(what) + " '" + std::string(name.substr(0, 128)) +
                           "' must be 1 to 128 characters of [A-Za-z0-9._+/-]");
  }
  return Status::Ok();
}

}  // namespace

std::string Hash128::Hex() const {
  XXH128_hash_t h;
  h.low64 = low;
  h.high64 = high;
  return Hex128(h);
}

Hash128 HashBytes(std::string_view bytes) {
  return FromXxh(XXH3_128bits(bytes.data(), bytes.size()));
}

Key ComposeKey(const KeyInput& input) {
  StreamedKey streamed(input.canonical_module.size());
  streamed.Append(input.canonical_module);
  // Cannot fail: the whole module was appended.
  return *streamed.Finish(input.target, input.compiler_id, input.options);
}

StreamedKey::StreamedKey(uint64_t module_bytes)
    : expected_(module_bytes), whole_(XXH3_createState()), module_(XXH3_createState()) {
  auto* whole = static_cast<XXH3_state_t*>(whole_);
  XXH3_128bits_reset(whole);
  UpdateLengthPrefixed(whole, kDomainTag);
  UpdateLength(whole, module_bytes);
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(module_));
}

StreamedKey::~StreamedKey() {
  XXH3_freeState(static_cast<XXH3_state_t*>(whole_));
  XXH3_freeState(static_cast<XXH3_state_t*>(module_));
}

void StreamedKey::Append(std::string_view piece) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(whole_), piece.data(), piece.size());
  XXH3_128bits_update(static_cast<XXH3_state_t*>(module_), piece.data(), piece.size());
  appended_ += piece.size();
}

Result<Key> StreamedKey::Finish(std::string_view target, std::string_view compiler_id,
                                std::vector<std::pair<std::string, std::string>> options) {
  if (appended_ != expected_) {
    return Error(InvalidArgument("the module was said to be " + std::to_string(expected_) +
                                 " bytes but " + std::to_string(appended_) + " came"));
  }
  std::sort(options.begin(), options.end());
  std::string options_bytes;
  AppendLengthPrefixed(options_bytes, std::to_string(options.size()));
  for (const auto& [k, v] : options) {
    AppendLengthPrefixed(options_bytes, k);
    AppendLengthPrefixed(options_bytes, v);
  }
  auto* whole = static_cast<XXH3_state_t*>(whole_);
  UpdateLengthPrefixed(whole, target);
  UpdateLengthPrefixed(whole, compiler_id);
  UpdateLengthPrefixed(whole, options_bytes);

  Key key;
  key.text = std::string(kKeyPrefix) + FromXxh(XXH3_128bits_digest(whole)).Hex();
  key.graph = FromXxh(XXH3_128bits_digest(static_cast<XXH3_state_t*>(module_)));
  key.target = HashBytes(target);
  key.compiler_id = HashBytes(compiler_id);
  key.options = HashBytes(options_bytes);
  return key;
}

std::string ComposeFileKey(std::string_view file_namespace, std::string_view path) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  UpdateLengthPrefixed(state, kFileDomainTag);
  UpdateLengthPrefixed(state, file_namespace);
  UpdateLengthPrefixed(state, path);
  const Hash128 whole = FromXxh(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return std::string(kKeyPrefix) + whole.Hex();
}

Status ValidateFileNamespace(std::string_view file_namespace) {
  const bool chars_ok = std::all_of(file_namespace.begin(), file_namespace.end(),
                                    [](char c) { return IsNameChar(c) && c != '+' && c != '/'; });
  if (file_namespace.empty() || file_namespace.size() > 64 || !chars_ok || file_namespace == "." ||
      file_namespace == "..") {
    return InvalidArgument("namespace '" + std::string(file_namespace.substr(0, 64)) +
                           "' must be 1 to 64 characters of [A-Za-z0-9._-]");
  }
  return Status::Ok();
}

namespace {

// Well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // Cut short.
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

Status ValidateFilePath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("file name '" + std::string(path.substr(0, 200)) + "' " + why);
  };
  if (path.empty() || path.size() > 4096) return bad("must be 1 to 4096 bytes");
  if (path.find('\0') != std::string_view::npos) return bad("holds a NUL byte");
  if (!IsUtf8(path)) return bad("is not UTF-8");
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return bad("has an empty, '.' or '..' component");
    }
    if (part.size() > 255) return bad("has a component over 255 bytes");
    start = slash + 1;
  }
  return Status::Ok();
}

bool IsWellFormedKey(std::string_view key) {
  // On every store read: a table and no early exit, which the compiler unrolls.
  static constexpr std::array<bool, 256> kLowerHex = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    for (int c = 'a'; c <= 'f'; ++c) t[c] = true;
    return t;
  }();
  if (key.size() != kKeyLength || !key.starts_with(kKeyPrefix)) return false;
  bool all_hex = true;
  for (size_t i = kKeyPrefix.size(); i < kKeyLength; ++i) {
    all_hex &= kLowerHex[static_cast<unsigned char>(key[i])];
  }
  return all_hex;
}

Status ValidateTarget(std::string_view target) { return ValidateName("target", target); }
Status ValidateCompilerId(std::string_view compiler_id) {
  return ValidateName("compiler id", compiler_id);
}
Status ValidateOption(std::string_view key, std::string_view value) {
  if (Status s = ValidateName("option name", key); !s.ok()) return s;
  if (value.find('\n') != std::string_view::npos || value.size() > 4096) {
    return InvalidArgument("option '" + std::string(key) +
                           "' value must be one line of at most 4096 bytes");
  }
  return Status::Ok();
}

}  // namespace hlocache::cache
