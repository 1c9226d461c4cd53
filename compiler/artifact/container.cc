#include "compiler/artifact/container.h"

#include <charconv>

#include <nlohmann/json.hpp>

#include <cstring>

#include "common/fast_hash.h"

namespace hlocache::compiler {
namespace {

void PutLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian(std::string_view in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(in[offset + static_cast<size_t>(i)]);
  }
  return value;
}

void PutBigEndian64(std::string& out, uint64_t value) {
  for (int i = 7; i >= 0; --i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetBigEndian64(std::string_view in, size_t offset) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value = (value << 8) | static_cast<unsigned char>(in[offset + i]);
  return value;
}

std::string HeaderJson(const ArtifactHeader& h) {
  nlohmann::ordered_json j;
  j["key"] = h.key;
  j["target"] = h.target;
  j["compiler_id"] = h.compiler_id;
  j["payload_kind"] = h.payload_kind;
  j["entry_symbol"] = h.entry_symbol;
  j["parameter_shapes"] = h.parameter_shapes;
  j["result_shape"] = h.result_shape;
  j["compile_seconds"] = h.compile_seconds;
  if (!h.file_namespace.empty() || !h.file_path.empty()) {
    j["namespace"] = h.file_namespace;
    j["path"] = h.file_path;
  }
  // Last, so that PeekCompileSeconds finds its field before the long one.
  if (!h.graph_zstd.empty()) j["graph_zstd"] = h.graph_zstd;
  // Names are checked to be UTF-8 before they get here; should one not be, it is replaced
  // rather than thrown on (it then no longer matches its key, and the artifact is refused).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status Corrupt(std::string_view what) { return DataLoss("corrupt artifact: " + std::string(what)); }

Result<std::string> StringField(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    return Error(Corrupt(std::string("header field '") + name + "' is missing or not a string"));
  }
  return it->get<std::string>();
}

}  // namespace

std::string EncodeArtifactWithRawHeader(std::string_view header_json, std::string_view payload) {
  std::string out;
  out.reserve(kArtifactFixedBytes + header_json.size() + payload.size());
  out.append(kArtifactMagic);
  PutLittleEndian(out, kArtifactFormatVersion, 4);
  PutLittleEndian(out, header_json.size(), 4);
  out.append(header_json);
  PutLittleEndian(out, payload.size(), 8);
  out.append(payload);
  const XXH128_hash_t sum = XXH3_128bits(out.data(), out.size());
  PutBigEndian64(out, sum.high64);
  PutBigEndian64(out, sum.low64);
  return out;
}

std::string EncodeArtifact(const ArtifactHeader& header, std::string_view payload) {
  return EncodeArtifactWithRawHeader(HeaderJson(header), payload);
}

Result<ArtifactHeader> ParseArtifactHeader(std::string_view json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error(Corrupt("header is not a JSON object"));
  ArtifactHeader h;
  HLOCACHE_ASSIGN_OR_RETURN(h.key, StringField(j, "key"));
  HLOCACHE_ASSIGN_OR_RETURN(h.target, StringField(j, "target"));
  HLOCACHE_ASSIGN_OR_RETURN(h.compiler_id, StringField(j, "compiler_id"));
  HLOCACHE_ASSIGN_OR_RETURN(h.payload_kind, StringField(j, "payload_kind"));
  HLOCACHE_ASSIGN_OR_RETURN(h.entry_symbol, StringField(j, "entry_symbol"));
  HLOCACHE_ASSIGN_OR_RETURN(h.result_shape, StringField(j, "result_shape"));
  auto params = j.find("parameter_shapes");
  if (params == j.end() || !params->is_array()) {
    return Error(Corrupt("header field 'parameter_shapes' is missing or not an array"));
  }
  for (const auto& p : *params) {
    if (!p.is_string()) return Error(Corrupt("a parameter shape is not a string"));
    h.parameter_shapes.push_back(p.get<std::string>());
  }
  auto seconds = j.find("compile_seconds");
  if (seconds == j.end() || !seconds->is_number()) {
    return Error(Corrupt("header field 'compile_seconds' is missing or not a number"));
  }
  h.compile_seconds = seconds->get<double>();
  if (auto graph = j.find("graph_zstd"); graph != j.end()) {
    if (!graph->is_string()) return Error(Corrupt("header field 'graph_zstd' is not a string"));
    h.graph_zstd = graph->get<std::string>();
  }
  for (auto [name, field] : {std::pair{"namespace", &h.file_namespace}, {"path", &h.file_path}}) {
    if (auto it = j.find(name); it != j.end()) {
      if (!it->is_string()) {
        return Error(Corrupt(std::string("header field '") + name + "' is not a string"));
      }
      *field = it->get<std::string>();
    }
  }
  return h;
}

Result<ArtifactHeader> PeekArtifactHeader(std::string_view prefix) {
  if (prefix.size() < 16 || prefix.substr(0, kArtifactMagic.size()) != kArtifactMagic) {
    return Error(InvalidArgument("not an hlocache artifact (no container magic)"));
  }
  const uint64_t header_bytes = GetLittleEndian(prefix, 12, 4);
  if (header_bytes > kMaxArtifactHeaderBytes || 16 + header_bytes > prefix.size()) {
    return Error(Corrupt("header length " + std::to_string(header_bytes) + " does not fit"));
  }
  return ParseArtifactHeader(prefix.substr(16, header_bytes));
}

std::string_view PeekHeaderText(std::string_view prefix) {
  if (prefix.size() < 16 || prefix.substr(0, kArtifactMagic.size()) != kArtifactMagic) return {};
  const uint64_t header_bytes = GetLittleEndian(prefix, 12, 4);
  if (16 + header_bytes > prefix.size()) return {};
  return prefix.substr(16, header_bytes);
}

double PeekCompileSeconds(std::string_view prefix) {
  std::string_view header = PeekHeaderText(prefix);
  constexpr std::string_view kField = "\"compile_seconds\"";
  const size_t at = header.find(kField);
  if (at == std::string_view::npos) return 0;
  header.remove_prefix(at + kField.size());
  while (!header.empty() && (header.front() == ' ' || header.front() == ':' ||
                             header.front() == '\n' || header.front() == '\t')) {
    header.remove_prefix(1);
  }
  double seconds = 0;
  auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), seconds);
  (void)end;
  return ec == std::errc() && seconds > 0 ? seconds : 0;
}

Result<DecodedArtifact> DecodeArtifact(std::string_view bytes) {
  if (bytes.size() < kArtifactFixedBytes ||
      bytes.substr(0, kArtifactMagic.size()) != kArtifactMagic) {
    return Error(InvalidArgument("not an hlocache artifact (" + std::to_string(bytes.size()) +
                                 " bytes without the container's magic)"));
  }
  const uint64_t version = GetLittleEndian(bytes, 8, 4);
  if (version != kArtifactFormatVersion) {
    return Error(FailedPrecondition(
        "artifact format version " + std::to_string(version) + " is not this hlocache's (" +
        std::to_string(kArtifactFormatVersion) + "): it was written by another release"));
  }
  const uint64_t header_bytes = GetLittleEndian(bytes, 12, 4);
  if (header_bytes > kMaxArtifactHeaderBytes || 16 + header_bytes + 8 + 16 > bytes.size()) {
    return Error(Corrupt("header length " + std::to_string(header_bytes) + " does not fit in " +
                         std::to_string(bytes.size()) + " bytes"));
  }
  const uint64_t payload_bytes = GetLittleEndian(bytes, 16 + header_bytes, 8);
  if (payload_bytes != bytes.size() - kArtifactFixedBytes - header_bytes) {
    return Error(Corrupt("payload length " + std::to_string(payload_bytes) + " does not match " +
                         std::to_string(bytes.size()) + " bytes"));
  }
  const size_t body = bytes.size() - 16;
  const XXH128_hash_t sum = XXH3_128bits(bytes.data(), body);
  if (sum.high64 != GetBigEndian64(bytes, body) || sum.low64 != GetBigEndian64(bytes, body + 8)) {
    return Error(Corrupt("checksum mismatch"));
  }

  DecodedArtifact out;
  HLOCACHE_ASSIGN_OR_RETURN(out.header, ParseArtifactHeader(bytes.substr(16, header_bytes)));
  out.payload = bytes.substr(24 + header_bytes, payload_bytes);
  return out;
}

}  // namespace hlocache::compiler
