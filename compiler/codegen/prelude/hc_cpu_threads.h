// Threads for generated CPU units: large elementwise loops are split into pieces that the
// calling thread and a pool of workers take in turn.
//
// - How many: the CPUs the process may run on (sched_getaffinity), or HLOCACHE_THREADS when set
//   to a positive number; 1 runs every loop on the calling thread. HLOCACHE_THREADS is read on
//   every split loop (a getenv against a loop of 2^17 elements or more), the affinity mask once,
//   the pool's size when the first split loop starts it.
// - Same results at any count: each piece computes its elements exactly as one thread would.
// - Never waits on a worker to make progress: the caller takes pieces too, and returns once
//   every piece is done and no worker still holds the loop. A worker that wakes late finds the
//   loop gone; a forked child, whose workers are not copied, runs every piece itself.
// - One split loop at a time per loaded executable: a second thread running the executable
//   meanwhile, or a loop inside a piece, runs on its own thread.
// - The pool is a function-local static of each loaded executable (symbols are hidden), started
//   by its first split loop and stopped (its workers joined) when the executable is unloaded.
// - Waits spin a while before they sleep (hc_spin_for): a worker after its loop, for the next
//   one, and the caller for the last piece. Waking a sleeping thread costs tens of microseconds
//   in a virtual machine (a futex wake and a reschedule), as long as a whole loop over a
//   megabyte; OpenMP runtimes spin before sleeping for the same reason.
//
// This is real C++, compiled on its own with the other preludes (compiler/codegen/prelude/
// check.cc); its text below the marker is embedded after hc_cpu.h's into kCpuPrelude, before
// the contractions, which split their work with it too. Changing it changes generated code:
// raise kCodegenVersion.
#pragma once

#include "compiler/codegen/prelude/hc_cpu.h"

// ---- The prelude: every generated unit starts with the text below this line. ----
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace hlocache_rt {

// The CPUs this process may run on, asked once per loaded executable: a syscall per split loop
// would sit on the hot path.
inline int hc_cpus() {
  static const int cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return cpus;
}

inline int hc_threads_wanted() {
  if (const char* s = std::getenv("HLOCACHE_THREADS"); s != nullptr && *s != 0) {
    const long n = std::strtol(s, nullptr, 10);
    if (n >= 1) return static_cast<int>(std::min<long>(n, 256));
  }
  return hc_cpus();
}

// Spins until done() holds or about `micros` microseconds pass; whether it held.
template <class Done>
bool hc_spin_for(int64_t micros, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (int spins = 0;; ++spins) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (spins % 64 == 63 && std::chrono::steady_clock::now() >= until) return done();
  }
}

// How long a thread spins before it sleeps: past the gap between two loops of one run, and
// short beside the time a training step spends between runs.
constexpr int64_t hc_spin_micros = 100;

// A loop over [lo, hi) of a split loop's range; `args` are the pointers it reads and writes.
// Returns 0, or 1 when it failed (out of memory, a called computation's failure).
using hc_loop_fn = int (*)(void* const* args, int64_t lo, int64_t hi);

// A pointer of any element type, as a split loop's argument.
inline void* hc_arg(const void* p) { return const_cast<void*>(p); }

class hc_pool {
 public:
  static hc_pool& get() {
    static hc_pool pool;
    return pool;
  }
  hc_pool(const hc_pool&) = delete;
  hc_pool& operator=(const hc_pool&) = delete;

  // fn(args, lo, hi) for [lo, hi) pieces of [0, n), `pieces` of them, on this thread and the
  // workers; returns when all are done: 0, or 1 when a piece failed.
  int run(int64_t n, int64_t pieces, hc_loop_fn fn, void* const* args) {
    job j{fn, args, n, (n + pieces - 1) / pieces, pieces};
    int sleeping = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &j;
      generation_.fetch_add(1);
      sleeping = sleeping_;
    }
    if (sleeping > 0) wake_.notify_all();  // Spinning workers see the generation.
    take(j);
    auto finished = [&] { return j.done.load() == j.pieces && holding_.load() == 0; };
    hc_spin_for(hc_spin_micros, finished);
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, finished);
    job_ = nullptr;
    return j.failed.load();
  }

  int workers() const { return static_cast<int>(workers_.size()); }
  std::mutex& busy() { return busy_; }
  static bool in_loop() { return in_loop_; }
  static void set_in_loop(bool v) { in_loop_ = v; }

 private:
  struct job {
    hc_loop_fn fn;
    void* const* args;
    int64_t n, piece, pieces;
    std::atomic<int64_t> next{0}, done{0};
    std::atomic<int> failed{0};
  };

  hc_pool() {
    const int threads = hc_threads_wanted();
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }
  ~hc_pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  static void take(job& j) {
    for (int64_t p; (p = j.next.fetch_add(1)) < j.pieces;) {
      const int64_t lo = p * j.piece;
      if (j.fn(j.args, lo, std::min(j.n, lo + j.piece)) != 0) j.failed = 1;
      j.done.fetch_add(1);
    }
  }

  void work() {
    in_loop_ = true;
    uint64_t seen = 0;
    for (;;) {
      job* j = nullptr;
      auto called = [&] { return stop_.load() || generation_.load() != seen; };
      const bool spun = hc_spin_for(hc_spin_micros, called);
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!spun) {
          ++sleeping_;
          wake_.wait(lock, called);
          --sleeping_;
        }
        if (stop_) return;
        seen = generation_.load();
        j = job_;
        if (j == nullptr) continue;  // Woke after the loop was done.
        holding_.fetch_add(1);
      }
      take(*j);
      {
        std::lock_guard<std::mutex> lock(mu_);
        holding_.fetch_sub(1);
      }
      finished_.notify_all();
    }
  }

  std::mutex busy_;  // Held by the thread whose loop the pool runs.
  std::mutex mu_;    // Guards what follows.
  std::condition_variable wake_, finished_;
  job* job_ = nullptr;
  // Changed under mu_; atomic so that spinning threads may read them without it.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> holding_{0};  // Workers inside the current loop.
  std::atomic<bool> stop_{false};
  int sleeping_ = 0;  // Workers waiting on wake_.
  std::vector<std::thread> workers_;
  // This thread is running a piece of a split loop (a worker, or the caller meanwhile).
  static inline thread_local bool in_loop_ = false;
};

// Calls fn(args, lo, hi) on pieces of [0, n) of at least `grain` elements, split across the
// pool when there are at least two such pieces and more than one thread is wanted. A split
// loop is a plain function of the unit (its pointers passed in `args`), shared by every loop
// of the same text: a lambda and a template instance per loop multiplied compile time.
// Returns 0, or 1 when a piece failed (the other pieces still ran).
[[gnu::noinline]] inline int hc_parallel_run(int64_t n, int64_t grain, hc_loop_fn fn,
                                             void* const* args) {
  const int wanted = n >= 2 * grain && !hc_pool::in_loop() ? hc_threads_wanted() : 1;
  if (wanted <= 1) return fn(args, 0, n);
  hc_pool& pool = hc_pool::get();
  std::unique_lock<std::mutex> busy(pool.busy(), std::try_to_lock);
  const int threads = std::min(wanted, pool.workers() + 1);
  if (!busy.owns_lock() || threads <= 1) return fn(args, 0, n);
  // A few pieces a thread, so that one slowed by other work does not hold up the rest.
  const int64_t pieces = std::min<int64_t>(n / grain, int64_t{4} * threads);
  hc_pool::set_in_loop(true);  // A loop inside a piece runs on its own thread.
  const int failed = pool.run(n, pieces, fn, args);
  hc_pool::set_in_loop(false);
  return failed;
}

// Multiply-adds a piece of a split dot or convolution does at least: in vector registers they
// take a fraction of a nanosecond each, and waking a worker tens of microseconds.
constexpr int64_t hc_parallel_macs = int64_t{1} << 20;

// Calls body(lo, hi) as hc_parallel_run does, for the prelude's own kernels (a few instances a
// unit; generated loops never use it: see hc_parallel_run). body returns false when it failed
// (out of memory); so does this, once every piece is done.
template <class Body>
bool hc_parallel_body(int64_t n, int64_t grain, Body& body) {
  void* const args[1] = {&body};
  return hc_parallel_run(
             n, grain,
             [](void* const* a, int64_t lo, int64_t hi) {
               return (*static_cast<Body*>(a[0]))(lo, hi) ? 0 : 1;
             },
             args) == 0;
}

}  // namespace hlocache_rt
