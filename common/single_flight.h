// Runs one call per key at a time: a caller that asks for a key whose call is in progress
// waits for that call and gets a copy of its result, instead of running it again. This is what
// turns a fleet asking for one missing artifact at once into one fetch or one compile.
//
// Thread safety: Do may be called from any number of threads. `fn` runs on the thread of the
// caller that started the call, without any lock held; it must not call Do for the same key.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace hlocache {

template <typename T>
class SingleFlight {
 public:
  // The value `fn` returned, for this caller or another one; `*shared` (when given) says
  // whether it came from another caller's call.
  T Do(const std::string& key, const std::function<T()>& fn, bool* shared = nullptr) {
    std::shared_ptr<Call> call;
    bool leader = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, inserted] = calls_.try_emplace(key);
      if (inserted) it->second = std::make_shared<Call>();
      call = it->second;
      leader = inserted;
    }
    if (shared) *shared = !leader;
    if (!leader) {
      std::unique_lock<std::mutex> lock(mu_);
      call->done.wait(lock, [&] { return call->value.has_value(); });
      return *call->value;
    }
    T value = fn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      call->value.emplace(value);
      calls_.erase(key);
    }
    call->done.notify_all();
    return value;
  }

 private:
  struct Call {
    std::condition_variable done;
    std::optional<T> value;
  };
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Call>> calls_;
};

}  // namespace hlocache
