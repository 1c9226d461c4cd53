#include <ostream>

#include "client/commands.h"

namespace hlocache::client {

int RunKey(const std::vector<std::string>& files, const keying::KeySettings& settings,
           std::ostream& out, std::ostream& err) {
  if (Status s = keying::ValidateKeySettings(settings); !s.ok()) {
    err << "hlocache key: " << s.message() << "\n";
    return 1;
  }
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
