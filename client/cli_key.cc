#include <algorithm>
#include <filesystem>
#include <ostream>

#include "client/local_commands.h"
#include "common/huge_pages.h"
#include "compiler/hlo/parser.h"

namespace hlocache::client {

void PrepareHeapToParse(const std::vector<std::string>& files, size_t at_once) {
  std::vector<size_t> sizes;
  for (const std::string& file : files) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    sizes.push_back(ec ? 0 : static_cast<size_t>(size));
  }
  std::sort(sizes.rbegin(), sizes.rend());
  size_t bytes = 0;
  for (size_t i = 0; i < std::min(at_once, sizes.size()); ++i) bytes += sizes[i];
  // About 12 bytes of parse and canonicalization a byte of text (Mixtral 8x7B's 3.9 MB peak
  // at about 45 MB).
  PrepareHeapForHugePages(bytes * 12);
}

namespace {

// The key of one file. `last`: the process exits next, and the module and its canonical text
// are left for exit to return whole, as compilers leave their ASTs, instead of freed block by
// block (a million-token module's hundreds of thousands of blocks took milliseconds); they are
// reachable from a static, so leak checkers do not count them. Any other is keyed without
// keeping its module, which is freed beside the printing of its text (KeyText).
Result<std::string> KeyOf(const std::string& file, const keying::KeySettings& settings, bool last) {
  HLOCACHE_ASSIGN_OR_RETURN(std::string text, hlo::ReadModuleFile(file));
  if (!last) {
    HLOCACHE_ASSIGN_OR_RETURN(
        keying::KeyedModule keyed,
        keying::KeyText(std::move(text), hlo::ModuleFileName(file), settings));
    return std::move(keyed.key.text);
  }
  HLOCACHE_ASSIGN_OR_RETURN(
      keying::ParsedAndKeyed keyed,
      keying::ParseAndKey(std::move(text), hlo::ModuleFileName(file), settings));
  std::string key = keyed.keyed.key.text;
  static keying::ParsedAndKeyed* const kept = new keying::ParsedAndKeyed(std::move(keyed));
  (void)kept;
  return key;
}

}  // namespace

int RunKey(const std::vector<std::string>& files, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err) {
  if (Status s = keying::ValidateKeySettings(settings); !s.ok()) {
    err << "hlocache key: " << s.message() << "\n";
    return 1;
  }
  PrepareHeapToParse(files, /*at_once=*/1);  // One module at a time, the last one kept.
  int status = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    Result<std::string> key = KeyOf(files[f], settings, /*last=*/f + 1 == files.size());
    if (!key) {
      err << key.error().message() << "\n";
      status = 1;
      continue;
    }
    out << *key << "  " << files[f] << "\n";
  }
  out.flush();
  return status;
}

}  // namespace hlocache::client
