#include <ostream>

#include "client/local_commands.h"

namespace hlocache::client {

int RunCanon(const std::string& file, const keying::KeySettings& settings, std::ostream& out,
             std::ostream& err) {
  PrepareHeapToParse({file}, 1);
  keying::KeySettings with_text = settings;
  with_text.keep_canonical_text = true;
  auto keyed = keying::KeyFile(file, with_text);
  if (!keyed) {
    err << keyed.error().message() << "\n";
    return 1;
  }
  out << keyed->canonical.text;
  out.flush();
  return 0;
}

}  // namespace hlocache::client
