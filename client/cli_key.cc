#include <algorithm>
#include <filesystem>
#include <ostream>

#include "client/commands.h"
#include "common/huge_pages.h"

namespace hlocache::client {

int RunKey(const std::vector<std::string>& files, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err) {
  if (Status s = keying::ValidateKeySettings(settings); !s.ok()) {
    err << "hlocache key: " << s.message() << "\n";
    return 1;
  }
  // A short-lived process: its heap grown for the parse at once, in huge pages.
  size_t largest = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec) largest = std::max<size_t>(largest, size);
  }
  PrepareHeapForHugePages(largest * 12);
  int status = 0;
  for (const std::string& file : files) {
    auto keyed = keying::KeyFile(file, settings);
    if (!keyed) {
      err << keyed.error().message() << "\n";
      status = 1;
      continue;
    }
    out << keyed->key.text << "  " << file << "\n";
  }
  out.flush();
  return status;
}

}  // namespace hlocache::client
