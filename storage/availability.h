// One backend's failure policy, written once for every user of a backend (the client's tiers,
// a server's upstream): a call that fails with kUnavailable makes the backend rest (a Backoff:
// 1 s, doubling to 30 s by default), calls during the rest are not tried, and the first success
// ends it. One lost connection costs a moment of sharing; a dead backend costs one connect
// timeout per rest, not one per request; no number of failures disables it for good.
//
// Other errors (a refused token, a full disk, a module the server will not compile) say
// nothing about whether the backend is up: they are counted, not rested on.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/backoff.h"
#include "common/status.h"

namespace hlocache::storage {

struct AvailabilityStats {
  uint64_t failures = 0;  // Calls that failed (any error).
  uint64_t skipped = 0;   // Calls not tried because the backend was resting.
  bool up = true;         // No failure since the last success.
};

class Availability {
 public:
  // Called with one line when the backend goes down and when it comes back.
  using Log = std::function<void(std::string_view line)>;
  // Called when a success ends a failure (after the line is logged): work that waited for the
  // backend may go on now rather than at the end of its wait.
  using OnBack = std::function<void()>;

  Availability(std::string name, BackoffOptions options, Log log = nullptr,
               OnBack on_back = nullptr)
      : name_(std::move(name)),
        backoff_(options),
        log_(std::move(log)),
        on_back_(std::move(on_back)) {}

  // Whether a call may try the backend now; counts the ones that may not.
  bool Admit();
  // The error a call that was not admitted returns.
  Status Resting() const;

  // The outcome of a call that was tried: a success ends a rest; kUnavailable starts or
  // lengthens one. Returns `outcome` unchanged.
  Status Record(Status outcome);
  template <typename T>
  Result<T> Record(Result<T> outcome) {
    if (outcome) {
      (void)Record(Status::Ok());
    } else {
      (void)Record(Status(outcome.error()));
    }
    return outcome;
  }

  // How much longer the backend rests (zero when it may be asked now).
  std::chrono::steady_clock::duration RestLeft() const { return backoff_.Left(); }
  bool up() const { return up_.load(); }
  AvailabilityStats stats() const;
  const std::string& name() const { return name_; }

 private:
  const std::string name_;
  Backoff backoff_;
  const Log log_;
  const OnBack on_back_;
  std::atomic<bool> up_{true};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> skipped_{0};
};

}  // namespace hlocache::storage
