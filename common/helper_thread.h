// A thread that does part of a caller's work beside it, started only when the system can start
// one. std::thread throws when it cannot (a limit on threads or processes, no memory for a
// stack); work that merely goes faster on two threads must not fail, let alone end the process,
// for that. Try() says whether the thread started; when it did not, the caller does the work
// itself.
//
// Thread safety: one owner; Join from the thread that started it.
#pragma once

#include <functional>
#include <thread>

namespace hlocache {

class HelperThread {
 public:
  HelperThread() = default;
  ~HelperThread() { Join(); }
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  // Starts `work` on a new thread; false (and `work` not run) when no thread could be started.
  bool Try(std::function<void()> work);
  // Waits for the work to end; nothing when no thread runs.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool running() const { return thread_.joinable(); }

 private:
  std::thread thread_;
};

}  // namespace hlocache
