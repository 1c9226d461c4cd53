// libFuzzer target: any bytes as an uploaded or downloaded artifact, through the two readers of
// the container (compiler/artifact/container.h and stream_check.h).
//
// A server checks an upload as it streams in (ArtifactStreamChecker), a client checks what it
// fetched whole (DecodeArtifact): the two must accept exactly the same containers and refuse the
// others with the same status code, whatever pieces the stream arrives in, or an artifact one
// side takes is one the other refuses. Of a container they accept, both must read the same
// header, PeekArtifactHeader too. Every error must be one line.
//
// The first byte chooses how the rest is used: as the container's bytes as they are, or as a
// header text and a payload wrapped in a container with a correct checksum (so that mutations
// reach the header's JSON and fields, past the checksum), which is then cut or extended by a
// few bytes. Any disagreement aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/artifact/container.h"
#include "compiler/artifact/stream_check.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using hlocache::Result;
using hlocache::Status;
using hlocache::StatusCode;
using hlocache::compiler::ArtifactHeader;
using hlocache::compiler::ArtifactStreamChecker;
using hlocache::compiler::kArtifactFixedBytes;

using hlocache::fuzzing::Check;

bool OneLine(const Status& s) { return s.message().find('\n') == std::string::npos; }

bool SameHeader(const ArtifactHeader& a, const ArtifactHeader& b) {
  // compile_seconds compared as bits: a NaN read twice is the same NaN.
  return a.key == b.key && a.target == b.target && a.compiler_id == b.compiler_id &&
         a.payload_kind == b.payload_kind && a.entry_symbol == b.entry_symbol &&
         a.parameter_shapes == b.parameter_shapes && a.result_shape == b.result_shape &&
         (a.compile_seconds == b.compile_seconds ||
          (a.compile_seconds != a.compile_seconds && b.compile_seconds != b.compile_seconds)) &&
         a.graph_zstd == b.graph_zstd && a.file_namespace == b.file_namespace &&
         a.file_path == b.file_path;
}

// The stream checker fed `bytes` in pieces of 1 to 64 bytes (sizes from `seed`; 0: whole).
// `refused_early`: whether a Feed refused them, before the end of the bytes was known.
Result<ArtifactHeader> CheckStreamed(std::string_view bytes, uint32_t seed, bool& refused_early) {
  refused_early = false;
  ArtifactStreamChecker checker;
  Status fed;
  hlocache::fuzzing::FeedInPieces(bytes, seed, 64, [&](std::string_view piece) {
    fed = checker.Feed(piece);
    return fed.ok();
  });
  Result<ArtifactHeader> finished = checker.Finish();
  if (!fed.ok()) {
    refused_early = true;
    // An error once is the error for good, Finish included.
    Check(!finished && finished.error().code() == fed.code());
  } else if (finished) {
    Check(checker.declared_size() == bytes.size() && checker.bytes_seen() == bytes.size());
  }
  return finished;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::string wrapped;
  std::string_view bytes = rest;
  if (mode & 1) {
    // data[1]: how much of the rest is the header text; data[2]: bytes cut from the end (or,
    // with its top bit, appended).
    const size_t header_bytes = std::min<size_t>(rest.size(), static_cast<size_t>(data[1]) * 4);
    wrapped = hlocache::compiler::EncodeArtifactWithRawHeader(rest.substr(0, header_bytes),
                                                              rest.substr(header_bytes));
    const size_t change = data[2] & 0x3f;
    if (data[2] & 0x80) {
      wrapped.append(change, '\0');
    } else if (data[2] & 0x40) {
      wrapped.resize(wrapped.size() - std::min(change, wrapped.size()));
    }
    bytes = wrapped;
  }

  const Result<hlocache::compiler::DecodedArtifact> decoded =
      hlocache::compiler::DecodeArtifact(bytes);
  bool refused_early = false, pieces_refused_early = false;
  const Result<ArtifactHeader> whole = CheckStreamed(bytes, 0, refused_early);
  const Result<ArtifactHeader> pieces =
      CheckStreamed(bytes, 1u + data[1] + (data[2] << 8), pieces_refused_early);

  Check(decoded.has_value() == whole.has_value() && whole.has_value() == pieces.has_value());
  Check(refused_early == pieces_refused_early);
  if (!decoded) {
    Check(OneLine(decoded.error()) && OneLine(whole.error()) && OneLine(pieces.error()));
    Check(whole.error().code() == pieces.error().code());
    // Under 40 bytes nothing is an artifact, and both say so; only a refusal made before the
    // end was known (of a newer version, of a header over the limit, from the first 16 bytes)
    // may say more.
    if (bytes.size() >= kArtifactFixedBytes || !refused_early) {
      Check(decoded.error().code() == whole.error().code());
    }
    if (bytes.size() < kArtifactFixedBytes)
      Check(decoded.error().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  Check(SameHeader(decoded->header, *whole) && SameHeader(decoded->header, *pieces));
  const Result<ArtifactHeader> peeked = hlocache::compiler::PeekArtifactHeader(bytes);
  Check(peeked.has_value() && SameHeader(decoded->header, *peeked));
  // The payload is the bytes between the lengths and the trailer.
  Check(decoded->payload.data() >= bytes.data() &&
        decoded->payload.data() + decoded->payload.size() == bytes.data() + bytes.size() - 16);
  (void)hlocache::compiler::PeekCompileSeconds(bytes);
  return 0;
}
