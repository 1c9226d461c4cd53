#include "server/verified_put.h"

#include "cache/key.h"
#include "compiler/artifact/container.h"
#include "compiler/artifact/file_payload.h"
#include "compiler/artifact/graph_section.h"

namespace hlocache::server {

VerifiedPut::VerifiedPut(cache::Store& store, std::string key, uint64_t length, bool strict)
    : store_(store), key_(std::move(key)), length_(length), strict_(strict) {
  // What is held whole arrives into one allocation (no copying as the buffer grows); a larger
  // artifact's buffer holds only its header before it streams to the store.
  if (length_ <= kBufferedBytes) buffer_.reserve(length_);
}

bool VerifiedPut::Fail(Status status) {
  failure_ = std::move(status);
  writer_.reset();
  return false;
}

bool VerifiedPut::Receive(std::string_view bytes) {
  if (!failure_.ok()) return false;
  if (Status s = checker_.Feed(bytes); !s.ok()) {
    return Fail(InvalidArgument("bad artifact: " + s.message()));
  }
  if (checker_.bytes_seen() > length_) {
    return Fail(InvalidArgument("body longer than its Content-Length"));
  }
  if (writer_) {
    if (Status s = writer_->Append(bytes); !s.ok()) return Fail(std::move(s));
    return true;
  }
  buffer_.append(bytes);
  if (checker_.declared_size() == 0) return true;  // The header has not all arrived yet.
  if (checker_.declared_size() != length_) {
    return Fail(InvalidArgument("artifact declares " + std::to_string(checker_.declared_size()) +
                                " bytes but the body has " + std::to_string(length_)));
  }
  if (!header_checked_ && !CheckHeader()) return false;
  if (length_ > kBufferedBytes) {
    auto writer = store_.StartPut(key_, info_);
    if (!writer) return Fail(writer.error());
    writer_ = std::move(*writer);
    if (Status s = writer_->Append(buffer_); !s.ok()) return Fail(std::move(s));
    std::string().swap(buffer_);
  }
  return true;
}

Result<cache::PutOutcome> VerifiedPut::Finish() {
  if (!failure_.ok()) return Error(failure_);
  auto header = checker_.Finish();
  if (!header) return Error(InvalidArgument("bad artifact: " + header.error().message()));
  if (!header_checked_ && !CheckHeader()) return Error(failure_);
  if (writer_) return writer_->Commit();
  return store_.Put(key_, buffer_, info_);
}

// The key of the graph the header carries, with its target and compiler: the graph streamed
// through the hash a piece at a time, since an uploader may make a small graph that
// decompresses to a gigabyte (graph_section.h).
Result<std::string> VerifiedPut::KeyOfGraph(const compiler::ArtifactHeader& header) {
  HLOCACHE_ASSIGN_OR_RETURN(std::unique_ptr<compiler::GraphReader> graph,
                            compiler::GraphReader::Open(header.graph_zstd));
  cache::StreamedKey key(graph->size());
  while (true) {
    HLOCACHE_ASSIGN_OR_RETURN(std::string_view piece, graph->Next());
    if (piece.empty()) break;
    key.Append(piece);
  }
  HLOCACHE_ASSIGN_OR_RETURN(cache::Key rekeyed, key.Finish(header.target, header.compiler_id));
  return std::move(rekeyed.text);
}

// The header must name this key; when strict, its target and payload kind must also make
// sense together.
bool VerifiedPut::CheckHeader() {
  header_checked_ = true;
  auto header = compiler::PeekArtifactHeader(buffer_);
  if (!header) return Fail(InvalidArgument("bad artifact: " + header.error().message()));
  if (header->key != key_) {
    return Fail(InvalidArgument("the artifact was built for key " + header->key + ", not " + key_));
  }
  if (header->payload_kind == compiler::kPayloadFile) return CheckFileHeader(*header);
  if (strict_) {
    if (Status s = cache::ValidateTarget(header->target); !s.ok()) return Fail(std::move(s));
    if (Status s = cache::ValidateCompilerId(header->compiler_id); !s.ok()) {
      return Fail(std::move(s));
    }
    const bool gpu = header->target.starts_with("cuda-");
    const std::string_view expected =
        gpu ? compiler::kPayloadCubinPlan : compiler::kPayloadSharedObject;
    if (header->payload_kind != expected) {
      return Fail(InvalidArgument("payload kind '" + header->payload_kind +
                                  "' does not run on target " + header->target));
    }
    // The key again, from the graph the artifact carries and the target and compiler it names:
    // an uploader cannot store an executable under another graph's key.
    if (header->graph_zstd.empty()) {
      return Fail(InvalidArgument(
          "the artifact carries no graph, so its key cannot be checked (--verify-uploads)"));
    }
    auto rekeyed = KeyOfGraph(*header);
    if (!rekeyed) return Fail(InvalidArgument("bad artifact: " + rekeyed.error().message()));
    if (*rekeyed != key_) {
      return Fail(InvalidArgument("the artifact's graph, target and compiler key to " + *rekeyed +
                                  ", not " + key_));
    }
  }
  info_.target = header->target;
  info_.compiler_id = header->compiler_id;
  info_.compile_seconds = header->compile_seconds;
  return true;
}

// A file artifact is always checked in full (it is cheap: no graph to key again): its header is
// a file's, and its namespace and path compose to the key it is stored under, so that a name
// cannot be made to list another name's bytes. Its catalog row holds the namespace and path.
bool VerifiedPut::CheckFileHeader(const compiler::ArtifactHeader& header) {
  if (Status s = compiler::CheckFileArtifactHeader(header, key_); !s.ok()) {
    return Fail(InvalidArgument("bad file artifact: " + s.message()));
  }
  if (Status s = cache::ValidateFileNamespace(header.file_namespace); !s.ok()) {
    return Fail(InvalidArgument("bad file artifact: " + s.message()));
  }
  if (Status s = cache::ValidateFilePath(header.file_path); !s.ok()) {
    return Fail(InvalidArgument("bad file artifact: " + s.message()));
  }
  if (cache::ComposeFileKey(header.file_namespace, header.file_path) != key_) {
    return Fail(InvalidArgument("the file artifact's namespace and path key to " +
                                cache::ComposeFileKey(header.file_namespace, header.file_path) +
                                ", not " + key_));
  }
  info_.target = std::string(compiler::kFileTarget);
  info_.compiler_id = header.file_namespace;
  info_.graph_name = header.file_path;
  return true;
}

}  // namespace hlocache::server
