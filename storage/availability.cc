#include "storage/availability.h"

#include <cstdio>

namespace hlocache::storage {

bool Availability::Admit() {
  if (!backoff_.Resting()) return true;
  ++skipped_;
  return false;
}

Status Availability::Resting() const {
  return Unavailable(name_ + " is resting after a failure; it is tried again later");
}

Status Availability::Record(Status outcome) {
  if (outcome.ok()) {
    backoff_.Succeeded();
    if (!up_.exchange(true)) {
      if (log_) log_(name_ + " is reachable again");
      if (on_back_) on_back_();
    }
    return outcome;
  }
  ++failures_;
  if (outcome.code() != StatusCode::kUnavailable) return outcome;
  const std::chrono::milliseconds rest = backoff_.Failed();
  if (up_.exchange(false) && log_) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(rest.count()) / 1000);
    log_(name_ + " skipped for " + seconds + " s: " + outcome.message());
  }
  return outcome;
}

AvailabilityStats Availability::stats() const {
  AvailabilityStats s;
  s.failures = failures_.load();
  s.skipped = skipped_.load();
  s.up = up_.load();
  return s;
}

}  // namespace hlocache::storage
