// Short waits for another thread, spun rather than slept: waking a thread that sleeps costs tens
// of microseconds on a virtual machine, longer than some waits between a key's two threads last.
// Each spin is bounded in time, after which the caller blocks as it would have: two threads that
// share one CPU (a process held to one, or more threads than CPUs) must not spin for long while
// the one waited for cannot run.
//
// Thread safety: any thread.
#pragma once

#include <atomic>
#include <chrono>

namespace hlocache {

// A hint to the CPU that the caller spins (x86's `pause`): the spinning core leaves the loop
// without a memory-order misprediction and yields to a hyperthread sibling. Nothing elsewhere.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins while `keep_waiting()` holds, for at most `budget`. Returns true when it stopped holding,
// false when the budget ran out first (the caller then blocks).
template <typename KeepWaiting>
bool SpinWhile(KeepWaiting keep_waiting, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (!keep_waiting()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return !keep_waiting();
  }
}

// Returns once `flag` is set: spun for at most `budget`, then blocked on it (std::atomic::wait).
// The thread that sets it must do so with SetAndWake, which wakes a blocked waiter.
inline void WaitUntilSet(const std::atomic<bool>& flag, std::chrono::microseconds budget) {
  if (!SpinWhile([&flag] { return !flag.load(std::memory_order_acquire); }, budget)) {
    flag.wait(false, std::memory_order_acquire);
  }
}

// Sets `flag` for WaitUntilSet, what was written before it visible to the waiter.
inline void SetAndWake(std::atomic<bool>& flag) {
  flag.store(true, std::memory_order_release);
  flag.notify_all();
}

}  // namespace hlocache
