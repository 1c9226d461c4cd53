// `hlocache export` and `hlocache import`: a cache as one file (schema/bundle.md).
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cache/store.h"
#include "client/cache.h"
#include "client/commands.h"
#include "common/fast_hash.h"
#include "common/status.h"
#include "common/zstd_frame.h"

namespace hlocache::client {
namespace {

constexpr std::string_view kBundleMagic = "hlocache-bundle 1\n";

// Streams bytes through one zstd frame into a file.
class ZstdWriter {
 public:
  explicit ZstdWriter(std::FILE* file) : file_(file), ctx_(ZSTD_createCCtx()) {
    ZSTD_CCtx_setParameter(ctx_, ZSTD_c_compressionLevel, 6);
    ZSTD_CCtx_setParameter(ctx_, ZSTD_c_checksumFlag, 1);
    buffer_.resize(ZSTD_CStreamOutSize());
  }
  ~ZstdWriter() { ZSTD_freeCCtx(ctx_); }
  bool Write(std::string_view bytes) { return Run(bytes, ZSTD_e_continue); }
  bool Finish() { return Run({}, ZSTD_e_end); }

 private:
  bool Run(std::string_view bytes, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    while (true) {
      ZSTD_outBuffer out{buffer_.data(), buffer_.size(), 0};
      const size_t left = ZSTD_compressStream2(ctx_, &out, &in, mode);
      if (ZSTD_isError(left)) return false;
      if (std::fwrite(buffer_.data(), 1, out.pos, file_) != out.pos) return false;
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return true;
    }
  }
  std::FILE* file_;
  ZSTD_CCtx* ctx_;
  std::string buffer_;
};

// Reads exact byte counts out of the one zstd frame a bundle is (schema/bundle.md). The frame
// must be of the current format: libzstd still decodes the frames of zstd's 0.x formats and
// sizes their windows by those formats' rules, past the bound it holds current frames to, so a
// bundle of a few dozen bytes could make import allocate a hundred megabytes.
class ZstdReader {
 public:
  explicit ZstdReader(std::FILE* file) : file_(file), ctx_(ZSTD_createDCtx()) {
    in_buffer_.resize(ZSTD_DStreamInSize());
  }
  ~ZstdReader() { ZSTD_freeDCtx(ctx_); }
  ZstdReader(const ZstdReader&) = delete;
  ZstdReader& operator=(const ZstdReader&) = delete;

  // Appends exactly n bytes to `out`; false at a premature end or corrupt input.
  bool Read(size_t n, std::string& out) {
    while (pending_.size() - pending_pos_ < n) {
      if (!Fill()) return false;
    }
    out.append(pending_, pending_pos_, n);
    pending_pos_ += n;
    return true;
  }
  bool ReadLine(std::string& out, size_t max) {
    out.clear();
    while (out.size() < max) {
      if (pending_pos_ == pending_.size() && !Fill()) return false;
      const char c = pending_[pending_pos_++];
      if (c == '\n') return true;
      out += c;
    }
    return false;
  }
  // Why the last Read or ReadLine failed when it was not the content's end: empty, or a few
  // words to follow the caller's own.
  const std::string& failure() const { return failure_; }

 private:
  bool Fill() {
    pending_.erase(0, pending_pos_);
    pending_pos_ = 0;
    if (frame_ended_ || !Buffered(1)) return false;
    if (!frame_started_) {
      if (!Buffered(4) ||
          !StartsCurrentZstdFrame(std::string_view(in_buffer_).substr(in_.pos, 4))) {
        failure_ = "not a zstd frame of the current format";
        return false;
      }
      frame_started_ = true;
    }
    std::string chunk(ZSTD_DStreamOutSize(), '\0');
    ZSTD_outBuffer out{chunk.data(), chunk.size(), 0};
    const size_t r = ZSTD_decompressStream(ctx_, &out, &in_);
    if (ZSTD_isError(r)) {
      failure_ = std::string("zstd: ") + ZSTD_getErrorName(r);
      return false;
    }
    // Whatever follows the frame is not read: a second frame could be of any format.
    frame_ended_ = r == 0;
    pending_.append(chunk.data(), out.pos);
    return true;
  }
  // True once at least n input bytes wait unread, reading the file for more as needed.
  bool Buffered(size_t n) {
    while (in_.size - in_.pos < n) {
      const size_t unread = in_.size - in_.pos;
      std::memmove(in_buffer_.data(), in_buffer_.data() + in_.pos, unread);
      const size_t got =
          std::fread(in_buffer_.data() + unread, 1, in_buffer_.size() - unread, file_);
      in_ = {in_buffer_.data(), unread + got, 0};
      if (got == 0) return false;
    }
    return true;
  }
  std::FILE* file_;
  ZSTD_DCtx* ctx_;
  std::string in_buffer_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool frame_started_ = false;
  bool frame_ended_ = false;
  std::string pending_;
  size_t pending_pos_ = 0;
  std::string failure_;
};

// The reader's reason for a failed read, in parentheses, to end an error line.
std::string Because(const ZstdReader& reader) {
  return reader.failure().empty() ? "" : " (" + reader.failure() + ")";
}

struct ManifestEntry {
  std::string key;
  uint64_t size = 0;
  std::string xxh3;
};

// The manifest's entries, each checked for the fields import reads and their types. The first
// that lacks one is the error, by its position: the entries' bytes follow one another, so past a
// size that cannot be read nothing else in the bundle can be found either.
Result<std::vector<ManifestEntry>> ReadManifest(const nlohmann::json& manifest) {
  if (!manifest.is_object() || !manifest.contains("entries") || !manifest["entries"].is_array()) {
    return Error(InvalidArgument("the manifest is not a JSON object with an \"entries\" array"));
  }
  std::vector<ManifestEntry> entries;
  for (const nlohmann::json& entry : manifest["entries"]) {
    const std::string where = "manifest entry " + std::to_string(entries.size() + 1);
    if (!entry.is_object()) return Error(InvalidArgument(where + " is not a JSON object"));
    for (const char* field : {"key", "xxh3"}) {
      if (!entry.contains(field) || !entry[field].is_string()) {
        return Error(InvalidArgument(where + ": \"" + field + "\" is missing or not a string"));
      }
    }
    if (!entry.contains("size") || !entry["size"].is_number_unsigned()) {
      return Error(InvalidArgument(where + ": \"size\" is missing or not a whole number of bytes"));
    }
    entries.push_back(ManifestEntry{entry["key"].get<std::string>(), entry["size"].get<uint64_t>(),
                                    entry["xxh3"].get<std::string>()});
  }
  return entries;
}

}  // namespace

int RunExport(const std::string& dir, const std::string& bundle, std::ostream& out,
              std::ostream& err) {
  cache::StoreOptions options;
  options.read_only = true;
  auto store = cache::Store::Open(dir, options);
  if (!store) {
    err << "hlocache export: " << store.error().message() << "\n";
    return 1;
  }
  auto entries = (*store)->List({});
  if (!entries) {
    err << "hlocache export: " << entries.error().message() << "\n";
    return 1;
  }
  nlohmann::json manifest = nlohmann::json::array();
  for (const cache::EntryInfo& e : *entries) {
    manifest.push_back({{"key", e.key},
                        {"size", e.size},
                        {"xxh3", e.checksum.Hex()},
                        {"target", e.artifact.target},
                        {"compiler_id", e.artifact.compiler_id},
                        {"graph_name", e.artifact.graph_name},
                        {"compile_seconds", e.artifact.compile_seconds}});
  }
  const std::string tmp = bundle + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (!file) {
    err << "hlocache export: cannot write " << bundle << "\n";
    return 1;
  }
  ZstdWriter writer(file);
  bool ok = writer.Write(kBundleMagic) &&
            writer.Write(nlohmann::json({{"entries", manifest}}).dump() + "\n");
  uint64_t bytes = 0;
  for (size_t i = 0; ok && i < entries->size(); ++i) {
    // Every entry is read through the store, so its checksum is verified on the way out.
    auto got = (*store)->Get((*entries)[i].key);
    if (!got || !*got || (*got)->size() != (*entries)[i].size) {
      err << "hlocache export: " << (*entries)[i].key << " could not be read back\n";
      ok = false;
      break;
    }
    bytes += (*got)->size();
    ok = writer.Write(**got);
  }
  ok = ok && writer.Finish();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), bundle.c_str()) != 0) {
    std::remove(tmp.c_str());
    err << "hlocache export: cannot write " << bundle << "\n";
    return 1;
  }
  out << "exported " << entries->size() << " entries (" << bytes << " bytes) to " << bundle << "\n";
  return 0;
}

int RunImport(const std::string& bundle, const std::string& spec, std::ostream& out,
              std::ostream& err) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(bundle.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    err << "hlocache import: cannot read " << bundle << "\n";
    return 1;
  }
  ZstdReader reader(file.get());
  std::string line;
  if (!reader.ReadLine(line, 64) || line + "\n" != kBundleMagic) {
    err << "hlocache import: " << bundle << " is not an hlocache bundle" << Because(reader) << "\n";
    return 1;
  }
  if (!reader.ReadLine(line, size_t{1} << 30)) {
    err << "hlocache import: " << bundle << ": the manifest is truncated" << Because(reader)
        << "\n";
    return 1;
  }
  const nlohmann::json manifest = nlohmann::json::parse(line, nullptr, false);
  if (manifest.is_discarded()) {
    err << "hlocache import: " << bundle << ": the manifest is not valid JSON\n";
    return 1;
  }
  // Checked whole before anything is stored: a malformed manifest refuses the bundle.
  const Result<std::vector<ManifestEntry>> entries = ReadManifest(manifest);
  if (!entries) {
    err << "hlocache import: " << bundle << ": " << entries.error().message() << "\n";
    return 1;
  }
  CacheOptions options = CacheOptions::FromEnvironment();
  auto cache = Cache::Open(spec, options);
  if (!cache) {
    err << "hlocache import: " << cache.error().message() << "\n";
    return 1;
  }
  int stored = 0, bad = 0;
  for (const ManifestEntry& entry : *entries) {
    const std::string& key = entry.key;
    std::string bytes;
    if (entry.size > (uint64_t{1} << 40) || !reader.Read(entry.size, bytes)) {
      err << "hlocache import: " << bundle << " ends inside " << key << Because(reader) << "\n";
      return 1;
    }
    if (Hex128(bytes.data(), bytes.size()) != entry.xxh3) {
      err << "hlocache import: " << key << ": checksum mismatch, skipped\n";
      ++bad;
      continue;
    }
    if (Status s = (*cache)->Put(key, bytes); !s.ok()) {
      err << "hlocache import: " << key << ": " << s.message() << "\n";
      ++bad;
      continue;
    }
    ++stored;
  }
  out << "imported " << stored << " entries from " << bundle;
  if (bad) out << "; " << bad << " refused";
  out << "\n";
  return bad ? 1 : 0;
}

}  // namespace hlocache::client
