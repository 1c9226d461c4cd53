#include "server/file_listing.h"

#include <nlohmann/json.hpp>

#include "compiler/artifact/file_payload.h"

namespace hlocache::server {

Result<std::vector<FileEntry>> ListStoreFiles(cache::Store& store, std::string_view file_namespace,
                                              std::string_view prefix, size_t limit) {
  cache::ListFilter filter;
  filter.by_name = true;
  filter.target = std::string(compiler::kFileTarget);
  filter.compiler_id = std::string(file_namespace);
  filter.graph_name_prefix = std::string(prefix);
  filter.limit = limit;
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<cache::EntryInfo> rows, store.List(filter));
  std::vector<FileEntry> out;
  out.reserve(rows.size());
  for (cache::EntryInfo& row : rows) {
    const uint64_t overhead =
        compiler::FileArtifactOverhead(row.key, file_namespace, row.artifact.graph_name);
    if (row.size < overhead) continue;  // Not a file artifact of this name: never listed.
    out.push_back(
        FileEntry{std::move(row.artifact.graph_name), row.size - overhead, std::move(row.key)});
  }
  return out;
}

std::string FormatFileListing(const std::vector<FileEntry>& entries) {
  std::string out;
  for (const FileEntry& e : entries) {
    nlohmann::ordered_json j;
    j["path"] = e.path;
    j["size"] = e.size;
    j["key"] = e.key;
    out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
  }
  return out;
}

Result<std::vector<FileEntry>> ParseFileListing(std::string_view ndjson) {
  std::vector<FileEntry> out;
  size_t start = 0, line = 0;
  while (start < ndjson.size()) {
    size_t end = ndjson.find('\n', start);
    if (end == std::string_view::npos) end = ndjson.size();
    ++line;
    const std::string_view text = ndjson.substr(start, end - start);
    start = end + 1;
    if (text.empty()) continue;
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string() ||
        !j.contains("size") || !j["size"].is_number_unsigned() || !j.contains("key") ||
        !j["key"].is_string()) {
      return Error(InvalidArgument("file listing line " + std::to_string(line) +
                                   " is not {\"path\", \"size\", \"key\"}"));
    }
    out.push_back(FileEntry{j["path"].get<std::string>(), j["size"].get<uint64_t>(),
                            j["key"].get<std::string>()});
  }
  return out;
}

std::vector<FileEntry> MergeFileListings(std::vector<FileEntry> first,
                                         std::vector<FileEntry> second) {
  std::vector<FileEntry> out;
  out.reserve(first.size() + second.size());
  size_t i = 0, k = 0;
  while (i < first.size() || k < second.size()) {
    if (k == second.size() || (i < first.size() && first[i].path <= second[k].path)) {
      if (k < second.size() && second[k].path == first[i].path) ++k;
      out.push_back(std::move(first[i++]));
    } else {
      out.push_back(std::move(second[k++]));
    }
  }
  return out;
}

}  // namespace hlocache::server
