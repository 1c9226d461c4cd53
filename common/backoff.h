// How long an endpoint that failed is left alone: `min_backoff` after a first failure, doubled
// with each failure in a row up to `max_backoff`; a success ends it at once. One lost connection
// costs a moment, a dead endpoint is asked only every `max_backoff`, and no number of failures
// disables it for good. The client's server tiers and a server's upstream both rest this way.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <mutex>

namespace hlocache {

struct BackoffOptions {
  std::chrono::milliseconds min_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
};

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Backoff(BackoffOptions options = {}) : options_(options) {}

  // How much longer the endpoint rests; zero when it may be asked now.
  Clock::duration Left(Clock::time_point now = Clock::now()) const {
    std::lock_guard<std::mutex> lock(mu_);
    return until_ > now ? until_ - now : Clock::duration::zero();
  }
  bool Resting(Clock::time_point now = Clock::now()) const {
    return Left(now) > Clock::duration::zero();
  }

  // A failure: the endpoint rests from now, twice as long as after the last failure in a row
  // (at least min_backoff, at most max_backoff). Returns how long.
  std::chrono::milliseconds Failed(Clock::time_point now = Clock::now()) {
    std::lock_guard<std::mutex> lock(mu_);
    rest_ = rest_ == std::chrono::milliseconds::zero()
                ? options_.min_backoff
                : std::min<std::chrono::milliseconds>(rest_ * 2, options_.max_backoff);
    rest_ = std::min(rest_, options_.max_backoff);
    until_ = now + rest_;
    return rest_;
  }

  // A success: no rest, and the next failure starts again from min_backoff. Returns whether
  // the endpoint was failing.
  bool Succeeded() {
    std::lock_guard<std::mutex> lock(mu_);
    const bool was_failing = rest_ != std::chrono::milliseconds::zero();
    rest_ = std::chrono::milliseconds::zero();
    until_ = Clock::time_point();
    return was_failing;
  }

 private:
  const BackoffOptions options_;
  mutable std::mutex mu_;
  std::chrono::milliseconds rest_{0};  // The current rest; zero after a success.
  Clock::time_point until_;
};

}  // namespace hlocache
