// The artifact container (schema/artifact-container.md): an executable with a self-describing
// header and an XXH3-128 trailer over everything before it.
//
// DecodeArtifact checks the magic, the version, the lengths and the checksum before it parses
// the header, so a corrupt artifact is reported as such and never handed to a loader.
//
// Ownership: DecodedArtifact::payload is a view into the bytes given to DecodeArtifact, which
// must outlive it. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hlocache::compiler {

inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr std::string_view kPayloadSharedObject = "shared-object";
inline constexpr std::string_view kPayloadCubinPlan = "cubin+plan";
// The container's first 8 bytes, and the bound on its header that readers enforce before they
// allocate for it (DecodeArtifact and the streaming check alike).
inline constexpr std::string_view kArtifactMagic("\x89HLOART\n", 8);
inline constexpr uint64_t kMaxArtifactHeaderBytes = uint64_t{1} << 20;
// Magic, version, the two lengths and the trailer: the smallest container, and the size under
// which no bytes are an artifact.
inline constexpr size_t kArtifactFixedBytes = 8 + 4 + 4 + 8 + 16;
// kPayloadFile ("file") is in compiler/artifact/file_payload.h.

struct ArtifactHeader {
  std::string key;
  std::string target;
  std::string compiler_id;
  std::string payload_kind;
  std::string entry_symbol;
  std::vector<std::string> parameter_shapes;  // Canonical shape text.
  std::string result_shape;
  double compile_seconds = 0;
  // The canonical module, encoded (compiler/artifact/graph_section.h); empty when the artifact
  // does not carry it (older writers, or a graph too large for the header).
  std::string graph_zstd;
  // File artifacts (payload kind `file`) only: the namespace and path the file is kept under;
  // empty otherwise.
  std::string file_namespace;
  std::string file_path;
};

struct DecodedArtifact {
  ArtifactHeader header;
  std::string_view payload;  // Into the decoded bytes.
};

// The container for `header` and `payload`.
std::string EncodeArtifact(const ArtifactHeader& header, std::string_view payload);

// Errors: kInvalidArgument when the bytes are not an artifact (too short, wrong magic),
// kFailedPrecondition for a format version newer than this build's, kDataLoss for a corrupt one
// (lengths that do not add up, checksum mismatch, a header that is not what the spec says).
Result<DecodedArtifact> DecodeArtifact(std::string_view bytes);

// The header alone, from its JSON text: kDataLoss unless it is an object with every field the
// spec requires, of the right type.
Result<ArtifactHeader> ParseArtifactHeader(std::string_view json);

// The header, from an artifact's first bytes (at least 16 plus the header's length), without
// the checksum check: for routing and bookkeeping before the rest has arrived, never for loading.
Result<ArtifactHeader> PeekArtifactHeader(std::string_view prefix);

// The header's JSON text, unparsed, from an artifact's first bytes (at least 16 plus the
// header's length); empty when they hold no container or not all of its header. For a cheap
// look at one field on the hot read path (PeekCompileSeconds, PeekFileNamespace).
std::string_view PeekHeaderText(std::string_view prefix);

// The header's compile_seconds from an artifact's first bytes; 0 when they hold no readable
// value. Cheap (no JSON parse): for statistics on the hot read path.
double PeekCompileSeconds(std::string_view prefix);

// For tests of the header checks: a container around an arbitrary header text, with a correct
// checksum.
std::string EncodeArtifactWithRawHeader(std::string_view header_json, std::string_view payload);

}  // namespace hlocache::compiler
