// The compile worker pool with real `hlocache compile-worker` processes: single-flight, a
// bounded queue, workers that hang or are killed with SIGKILL, and job folders that never
// outlive their job.
#include "compiler/worker_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "compiler/artifact/container.h"
#include "compiler/artifact/loader.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kModule = R"(HloModule m
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[16] parameter(1)
  s = f32[16] add(a, b)
  ROOT t = f32[16] tanh(s)
})";

constexpr const char* kKey = "v1-0123456789abcdef0123456789abcdef";

// Processes of process group `group` that are still running (zombies, whose parent has gone and
// which wait for init to reap them, do not count).
bool Running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

int LiveProcessesInGroup(pid_t group) {
  int live = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    if (pgrp == group && state != 'Z') ++live;
  }
  return live;
}

// Waits up to 10 s for the group to be gone: a SIGKILL is delivered asynchronously.
bool GroupGone(pid_t group) {
  for (int i = 0; i < 1000; ++i) {
    if (LiveProcessesInGroup(group) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hlocache-pool-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "jobs");
    // The workers' compiles find nothing compiled before (the tests count on compiles that take
    // a while, such as concurrent requests meeting in one).
    ::setenv("HLOCACHE_OBJECT_CACHE", (root_ / "objects").c_str(), 1);
  }
  void TearDown() override { fs::remove_all(root_); }

  WorkerPoolOptions Options() {
    WorkerPoolOptions o;
    o.worker_binary = HLOCACHE_BINARY;
    o.temp_root = root_ / "jobs";
    o.on_worker_started = [this](pid_t pid) {
      started_.fetch_add(1);
      last_pid_.store(pid);
    };
    return o;
  }

  // A stand-in C++ compiler that answers --version like GCC and then hangs: a compile that
  // never ends.
  std::string HangingCompiler() {
    const fs::path path = root_ / "hanging-c++";
    std::ofstream(path) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'g++ (Debian 12.2.0-14) 12.2.0';"
                           " echo 'Free Software Foundation'; exit 0; fi\n"
                           "echo $$ > " +
                               (root_ / "compiler.pid").string() +
                               "\n"
                               "exec sleep 600\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }

  // The hanging compiler's pid, once it has started (0 before).
  pid_t CompilerPid() const {
    std::ifstream in(root_ / "compiler.pid");
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }

  bool JobFoldersGone() const { return fs::is_empty(root_ / "jobs"); }

  fs::path root_;
  std::atomic<int> started_{0};
  std::atomic<pid_t> last_pid_{0};
};

TEST_F(WorkerPoolTest, CompilesInAWorkerAndReturnsAVerifiedArtifact) {
  WorkerPool pool(Options());
  auto outcome = pool.Compile({kKey, kModule, "", "m.hlo"});
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->coalesced);
  auto decoded = DecodeArtifact(outcome->artifact);
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(decoded->header.key, kKey);
  EXPECT_EQ(decoded->header.parameter_shapes, (std::vector<std::string>{"f32[16]", "f32[16]"}));
  EXPECT_THAT(LoadedExecutable::Load(outcome->artifact), IsOk());
  EXPECT_EQ(started_.load(), 1);
  EXPECT_EQ(pool.stats().compiles, 1u);
  EXPECT_TRUE(JobFoldersGone());
}

TEST_F(WorkerPoolTest, WorkerErrorsComeBackWithTheirCodeAndLocation) {
  WorkerPool pool(Options());
  auto bad =
      pool.Compile({kKey, "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, c)\n}",
                    "", "bad.hlo"});
  EXPECT_THAT(bad, StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad.hlo:3:")));
  auto unsupported =
      pool.Compile({kKey,
                    "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT s = f32[2] custom-call(a), "
                    "custom_call_target=\"f\"\n}",
                    "", "custom.hlo"});
  EXPECT_THAT(unsupported, StatusIs(StatusCode::kFailedPrecondition,
                                    HasSubstr("custom.hlo:3: the CPU code generator does not "
                                              "support 'custom-call'")));
  EXPECT_EQ(pool.stats().failures, 2u);
  EXPECT_TRUE(JobFoldersGone());
}

TEST_F(WorkerPoolTest, SixteenConcurrentRequestsForOneKeyShareOneCompile) {
  WorkerPool pool(Options());
  std::vector<std::thread> threads;
  std::vector<Result<CompileOutcome>> outcomes(16, Error(Internal("not run")));
  for (size_t i = 0; i < outcomes.size(); ++i) {
    threads.emplace_back([&, i] { outcomes[i] = pool.Compile({kKey, kModule, "", "m.hlo"}); });
  }
  for (std::thread& t : threads) t.join();
  int coalesced = 0;
  for (const auto& o : outcomes) {
    ASSERT_THAT(o, IsOk());
    EXPECT_EQ(o->artifact, outcomes[0]->artifact);
    coalesced += o->coalesced;
  }
  EXPECT_EQ(started_.load(), 1) << "exactly one worker process compiled";
  EXPECT_EQ(pool.stats().compiles, 1u);
  EXPECT_EQ(pool.stats().coalesced, 15u);
  EXPECT_EQ(coalesced, 15);
}

TEST_F(WorkerPoolTest, ACompilePublishedAfterTheCallersLookupIsFoundNotRepeated) {
  // A server's two requests for one key, both of which missed in its store: the first
  // compiles and publishes before the second reaches the pool.
  WorkerPool pool(Options());
  std::mutex store_mu;
  std::map<std::string, std::string> store;
  auto request = [&] {
    CompileRequest r{kKey, kModule, "", "m.hlo"};
    r.publish = [&](const std::string& artifact) {
      std::lock_guard<std::mutex> lock(store_mu);
      store[kKey] = artifact;
    };
    r.find = [&]() -> std::optional<std::string> {
      std::lock_guard<std::mutex> lock(store_mu);
      auto it = store.find(kKey);
      if (it == store.end()) return std::nullopt;
      return it->second;
    };
    return r;
  };
  auto first = pool.Compile(request());
  ASSERT_THAT(first, IsOk());
  EXPECT_FALSE(first->coalesced);
  auto second = pool.Compile(request());
  ASSERT_THAT(second, IsOk());
  EXPECT_TRUE(second->coalesced);
  EXPECT_EQ(second->artifact, first->artifact);
  EXPECT_EQ(started_.load(), 1) << "the second request compiled again";
  EXPECT_EQ(pool.stats().compiles, 1u);
  EXPECT_EQ(pool.stats().coalesced, 1u);
}

TEST_F(WorkerPoolTest, AHungCompilerIsKilledAtTheTimeLimitAndThePoolGoesOn) {
  WorkerPoolOptions options = Options();
  options.worker_args = {"--cxx", HangingCompiler()};
  options.timeout = std::chrono::seconds(2);
  WorkerPool hanging(options);
  auto outcome = hanging.Compile({kKey, kModule, "", "m.hlo"});
  EXPECT_THAT(outcome, StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("time limit")));
  // The worker's group went with it: no `sleep 600` is left behind.
  const pid_t pid = last_pid_.load();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(GroupGone(pid)) << "the worker's process group is still alive";
  ASSERT_GT(CompilerPid(), 0) << "the compiler never started";
  EXPECT_FALSE(Running(CompilerPid())) << "the hung compiler outlived its job";
  EXPECT_TRUE(JobFoldersGone());

  WorkerPool pool(Options());
  EXPECT_THAT(pool.Compile({kKey, kModule, "", "m.hlo"}), IsOk());
}

TEST_F(WorkerPoolTest, AWorkerKilledMidCompileFailsOnlyItsJob) {
  WorkerPoolOptions options = Options();
  options.worker_args = {"--cxx", HangingCompiler()};
  WorkerPool pool(options);
  std::thread killer([&] {
    // Mid-compile: once the worker has started its compiler.
    while (CompilerPid() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(last_pid_.load(), SIGKILL);
  });
  auto outcome = pool.Compile({kKey, kModule, "", "m.hlo"});
  killer.join();
  EXPECT_THAT(outcome, StatusIs(StatusCode::kInternal, HasSubstr("killed by signal 9")));
  EXPECT_TRUE(GroupGone(last_pid_.load())) << "the worker's process group is still alive";
  EXPECT_FALSE(Running(CompilerPid())) << "the compiler outlived its worker";
  EXPECT_TRUE(JobFoldersGone());
  EXPECT_EQ(pool.stats().failures, 1u);
  EXPECT_EQ(pool.stats().running, 0u);

  // The same pool serves the next request; a retry of the same key compiles afresh.
  WorkerPool healthy(Options());
  EXPECT_THAT(healthy.Compile({kKey, kModule, "", "m.hlo"}), IsOk());
}

TEST_F(WorkerPoolTest, AFullQueueRefusesAtOnce) {
  WorkerPoolOptions options = Options();
  options.worker_args = {"--cxx", HangingCompiler()};
  options.workers = 1;
  options.max_queue = 1;
  options.timeout = std::chrono::seconds(3);
  WorkerPool pool(options);
  std::thread running([&] {
    (void)pool.Compile({"v1-00000000000000000000000000000001", kModule, "", ""});
  });
  while (pool.stats().running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread waiting([&] {
    (void)pool.Compile({"v1-00000000000000000000000000000002", kModule, "", ""});
  });
  while (pool.stats().waiting == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto refused = pool.Compile({"v1-00000000000000000000000000000003", kModule, "", ""});
  EXPECT_THAT(refused, StatusIs(StatusCode::kResourceExhausted, HasSubstr("queue is full")));
  // A request for a key already in flight joins it instead of queueing.
  std::thread joining([&] {
    (void)pool.Compile({"v1-00000000000000000000000000000001", kModule, "", ""});
  });
  running.join();
  waiting.join();
  joining.join();
  EXPECT_EQ(pool.stats().rejected, 1u);
  EXPECT_EQ(pool.stats().coalesced, 1u);
  EXPECT_TRUE(JobFoldersGone());
}

}  // namespace
}  // namespace hlocache::compiler
