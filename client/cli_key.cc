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

int RunKey(const std::vector<std::string>& files, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err) {
  if (Status s = keying::ValidateKeySettings(settings); !s.ok()) {
    err << "hlocache key: " << s.message() << "\n";
    return 1;
  }
  PrepareHeapToParse(files, /*at_once=*/1);  // One module at a time, the last one kept.
  int status = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    auto text = hlo::ReadModuleFile(files[f]);
    auto keyed =
        text ? keying::ParseAndKey(std::move(*text), hlo::ModuleFileName(files[f]), settings)
             : Result<keying::ParsedAndKeyed>(Error(text.error()));
    if (!keyed) {
      err << keyed.error().message() << "\n";
      status = 1;
      continue;
    }
    out << keyed->keyed.key.text << "  " << files[f] << "\n";
    if (f + 1 == files.size()) {
      // The process exits next: the last module and its canonical text are left for exit to
      // return whole, as compilers leave their ASTs, instead of freed block by block (a
      // million-token module's hundreds of thousands of blocks took milliseconds). Reachable
      // from a static, so leak checkers do not count them.
      static keying::ParsedAndKeyed* const kept = new keying::ParsedAndKeyed(std::move(*keyed));
      (void)kept;
    }
  }
  out.flush();
  return status;
}

}  // namespace hlocache::client
