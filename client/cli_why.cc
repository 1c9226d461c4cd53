#include <fstream>
#include <ostream>
#include <sstream>
#include <string_view>

#include "client/local_commands.h"

namespace hlocache::client {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The source text of a 1-based line of a file (trimmed, shortened), or "" if unavailable.
std::string SourceLine(const std::string& path, uint32_t line) {
  if (line == 0 || path == "-") return "";
  std::ifstream in(path);
  std::string text;
  for (uint32_t i = 0; i < line && std::getline(in, text); ++i) {
  }
  size_t first = text.find_first_not_of(" \t");
  text = first == std::string::npos ? "" : text.substr(first);
  if (text.size() > 160) text = text.substr(0, 157) + "...";
  return text;
}

void ShowLine(std::ostream& out, std::string_view label, const std::string& path,
              const keying::KeyedModule& m, size_t index,
              const std::vector<std::string_view>& lines) {
  out << "  " << label << " canonical: ";
  if (index < lines.size()) {
    out << lines[index] << "\n";
  } else {
    out << "(end of module)\n";
  }
  uint32_t source_line =
      index < m.canonical.source_lines.size() ? m.canonical.source_lines[index] : 0;
  if (source_line) {
    out << "  " << label << " source:    " << path << ":" << source_line << ": "
        << SourceLine(path, source_line) << "\n";
  }
}

}  // namespace

int RunWhy(const std::string& a, const std::string& b, const keying::KeySettings& key_settings,
           std::ostream& out, std::ostream& err) {
  keying::KeySettings settings = key_settings;
  settings.record_source_lines = true;
  settings.keep_canonical_text = true;  // Compared line by line.
  PrepareHeapToParse({a, b}, 2);        // Both modules are held at once.
  auto ka = keying::KeyFile(a, settings);
  if (!ka) {
    err << ka.error().message() << "\n";
    return 1;
  }
  auto kb = keying::KeyFile(b, settings);
  if (!kb) {
    err << kb.error().message() << "\n";
    return 1;
  }
  out << ka->key.text << "  " << a << "\n" << kb->key.text << "  " << b << "\n";
  if (ka->key.text == kb->key.text) {
    out << "same key: the two modules are the same program\n";
    return 0;
  }
  struct Part {
    std::string_view name;
    bool same;
  };
  const Part parts[] = {{"graph", ka->key.graph == kb->key.graph},
                        {"target", ka->key.target == kb->key.target},
                        {"compiler id", ka->key.compiler_id == kb->key.compiler_id},
                        {"options", ka->key.options == kb->key.options}};
  out << "keys differ in:";
  for (const Part& p : parts) {
    if (!p.same) out << " " << p.name;
  }
  out << "\n";
  if (ka->key.graph == kb->key.graph) return 1;
  auto la = SplitLines(ka->canonical.text);
  auto lb = SplitLines(kb->canonical.text);
  size_t i = 0;
  while (i < la.size() && i < lb.size() && la[i] == lb[i]) ++i;
  out << "first difference at canonical line " << (i + 1) << ":\n";
  ShowLine(out, "A", a, *ka, i, la);
  ShowLine(out, "B", b, *kb, i, lb);
  return 1;
}

}  // namespace hlocache::client
