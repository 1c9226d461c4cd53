#include "common/helper_thread.h"

#include <system_error>
#include <utility>

namespace hlocache {

bool HelperThread::Try(std::function<void()> work) {
  // The one exception caught below main: the standard library reports a thread it could not
  // start only by throwing, and here that is an answer (do the work inline), not an error.
  try {
    thread_ = std::thread(std::move(work));
  } catch (const std::system_error&) {
    return false;
  }
  return true;
}

}  // namespace hlocache
