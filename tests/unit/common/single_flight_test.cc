#include "common/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace hlocache {
namespace {

TEST(SingleFlightTest, ConcurrentCallsForOneKeyRunOnceAndShareItsValue) {
  SingleFlight<int> flights;
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  constexpr int kCallers = 12;
  std::vector<int> values(kCallers, -1);
  std::vector<char> shared(kCallers, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      bool was_shared = false;
      values[i] = flights.Do(
          "key",
          [&] {
            ++runs;
            // Hold the call open until every caller has had time to join it.
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return 42;
          },
          &was_shared);
      shared[i] = was_shared;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  release = true;
  for (auto& t : threads) t.join();
  // Callers that arrived after the call ended start a new one; with the call held open for
  // 200 ms, all of them joined the first.
  EXPECT_EQ(runs.load(), 1);
  int leaders = 0;
  for (int i = 0; i < kCallers; ++i) {
    EXPECT_EQ(values[i], 42);
    leaders += shared[i] ? 0 : 1;
  }
  EXPECT_EQ(leaders, 1);
}

TEST(SingleFlightTest, DifferentKeysRunSideBySideAndAFinishedKeyRunsAgain) {
  SingleFlight<std::string> flights;
  std::atomic<int> inside{0};
  // Each call waits (up to 10 s) for the other key's call to be running too: if calls for
  // different keys were serialized, neither would see the other.
  auto meet = [&](std::string value) {
    return [&, value] {
      ++inside;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (inside.load() < 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return inside.load() >= 2 ? value : std::string("alone");
    };
  };
  std::string a, b;
  std::thread ta([&] { a = flights.Do("a", meet("A")); });
  std::thread tb([&] { b = flights.Do("b", meet("B")); });
  ta.join();
  tb.join();
  EXPECT_EQ(a, "A");
  EXPECT_EQ(b, "B");
  bool shared = true;
  EXPECT_EQ(flights.Do("a", meet("A again"), &shared), "A again");
  EXPECT_FALSE(shared) << "a finished call is not shared with a later caller";
}

}  // namespace
}  // namespace hlocache
