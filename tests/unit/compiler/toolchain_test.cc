// The system C++ compiler as a backend: real compiles, real failures, real timeouts.
#include "compiler/toolchain.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "compiler/artifact/loader.h"
#include "compiler/target.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ToolchainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlocache-toolchain-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    temp_root_ = root_ / "tmp";
    fs::create_directories(temp_root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  ToolchainOptions Options(std::string cxx = "c++") {
    ToolchainOptions o;
    o.cxx = std::move(cxx);
    o.temp_root = temp_root_;
    o.object_cache = root_ / "objects";  // Its own: nothing compiled before is taken from it.
    return o;
  }
  // A stand-in compiler: a shell script.
  std::string FakeCompiler(const std::string& name, const std::string& body) {
    const fs::path path = root_ / name;
    std::ofstream(path) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'c++ (Debian 12.2.0-14) 12.2.0';"
                           " echo 'Copyright (C) 2022 Free Software Foundation, Inc.'; exit 0; fi\n"
                        << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }
  size_t LeftoverFolders() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(temp_root_), {}));
  }

  fs::path root_, temp_root_;
};

TEST_F(ToolchainTest, ProbesTheSystemCompiler) {
  auto tc = Toolchain::Probe(Options());
  ASSERT_THAT(tc, IsOk());
  EXPECT_TRUE(
      std::regex_match(tc->version(), std::regex("(gcc|clang)-[0-9]+\\.[0-9]+(\\.[0-9]+)?")))
      << tc->version();
  EXPECT_EQ(tc->CompilerId(), tc->version() + "/" + std::string(kCodegenVersion) + "/O2/" +
                                  std::string(kCpuHostNeeds));
  EXPECT_EQ(LeftoverFolders(), 0u);
}

TEST_F(ToolchainTest, CompilesASharedObjectThatLoadsAndRuns) {
  auto tc = Toolchain::Probe(Options());
  ASSERT_THAT(tc, IsOk());
  auto so = tc->CompileSharedObject(
      "extern \"C\" __attribute__((visibility(\"default\"))) long hlocache_entry(long x) {\n"
      "  long s = 0;\n"
      "  for (long i = 0; i <= x; ++i) s += i;\n"
      "  return s;\n"
      "}\n"
      "extern \"C\" int hidden_helper() { return 1; }\n",
      HostCpuTarget());
  ASSERT_THAT(so, IsOk());
  EXPECT_EQ(so->substr(0, 4),
            "\x7f"
            "ELF");
  auto library = InMemoryLibrary::Open(*so, "toolchain-test");
  ASSERT_THAT(library, IsOk());
  auto entry = reinterpret_cast<long (*)(long)>(::dlsym(library->handle(), "hlocache_entry"));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry(100), 5050);
  // Only what the generated code exports is visible.
  EXPECT_EQ(::dlsym(library->handle(), "hidden_helper"), nullptr);
  EXPECT_EQ(LeftoverFolders(), 0u);
}

TEST_F(ToolchainTest, SeveralUnitsCompileSideBySideIntoOneSharedObject) {
  ToolchainOptions options = Options();
  options.jobs = 2;
  auto tc = Toolchain::Probe(options);
  ASSERT_THAT(tc, IsOk());
  // Three units calling each other: the link resolves them into one object.
  const std::vector<std::string> units = {
      "int twice(int);\nint plus_one(int);\n"
      "extern \"C\" __attribute__((visibility(\"default\"))) int hlocache_entry(int x) {\n"
      "  return plus_one(twice(x));\n}\n",
      "int twice(int x) { return 2 * x; }\n", "int plus_one(int x) { return x + 1; }\n"};
  auto so = tc->CompileSharedObject(units, HostCpuTarget());
  ASSERT_THAT(so, IsOk());
  auto library = InMemoryLibrary::Open(*so, "toolchain-test");
  ASSERT_THAT(library, IsOk());
  auto entry = reinterpret_cast<int (*)(int)>(::dlsym(library->handle(), "hlocache_entry"));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry(20), 41);
  EXPECT_EQ(::dlsym(library->handle(), "twice"), nullptr);
  // A unit that does not compile is named in the error, and nothing is left behind.
  const std::vector<std::string> broken = {units[0], units[1],
                                           "int plus_one(int x) { return y; }\n"};
  EXPECT_THAT(tc->CompileSharedObject(broken, HostCpuTarget()),
              StatusIs(StatusCode::kInternal, HasSubstr("unit2.cc:1:")));
  EXPECT_EQ(LeftoverFolders(), 0u);
}

TEST_F(ToolchainTest, CompileErrorsShowTheCompilersFirstLines) {
  auto tc = Toolchain::Probe(Options());
  ASSERT_THAT(tc, IsOk());
  auto so = tc->CompileSharedObject("int f() {\n  return undeclared_name;\n}\n", HostCpuTarget());
  EXPECT_THAT(so, StatusIs(StatusCode::kInternal, HasSubstr("module.cc:2:")));
  EXPECT_THAT(so, StatusIs(StatusCode::kInternal, HasSubstr("undeclared_name")));
  EXPECT_EQ(LeftoverFolders(), 0u) << "a failed compile left its folder behind";
}

TEST_F(ToolchainTest, UnknownTargetsAreRefusedBeforeCompiling) {
  auto tc = Toolchain::Probe(Options());
  ASSERT_THAT(tc, IsOk());
  EXPECT_THAT(tc->CompileSharedObject("int x;", "cuda-sm_90"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cuda-sm_90")));
  EXPECT_THAT(TargetArchFlag("cpu-x86-64-v3"), IsOk());
  EXPECT_EQ(*TargetArchFlag("cpu-x86-64-v4"), "-march=x86-64-v4");
}

TEST_F(ToolchainTest, AHungCompilerIsKilledWithEverythingItStarted) {
  // The compiler starts a grandchild (as cc1plus would) and both hang.
  const fs::path pid_file = root_ / "grandchild.pid";
  ToolchainOptions o =
      Options(FakeCompiler("hang.sh", "sleep 300 & echo $! > '" + pid_file.string() + "'\nwait\n"));
  o.timeout = std::chrono::milliseconds(500);
  auto tc = Toolchain::Probe(o);
  ASSERT_THAT(tc, IsOk());
  // Were the timeout ignored, the script would exit 0 after 300 s without a shared object.
  EXPECT_THAT(tc->CompileSharedObject("int x;", HostCpuTarget()),
              StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("time limit")));
  // The grandchild is gone too (or a zombie awaiting its reaper), not sleeping on.
  int grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) break;  // Gone.
    const char state = line[line.rfind(')') + 2];
    if (state == 'Z' || state == 'X') break;
    ASSERT_LT(i, 99) << "grandchild " << grandchild << " still running: " << line;
    usleep(20000);
  }
  EXPECT_EQ(LeftoverFolders(), 0u);
}

TEST_F(ToolchainTest, ACrashingCompilerFailsThatCompileOnly) {
  auto tc =
      Toolchain::Probe(Options(FakeCompiler("crash.sh", "echo about to crash\nkill -SEGV $$")));
  ASSERT_THAT(tc, IsOk());
  EXPECT_THAT(tc->CompileSharedObject("int x;", HostCpuTarget()),
              StatusIs(StatusCode::kInternal, HasSubstr("signal 11")));
  auto silent = Toolchain::Probe(Options(FakeCompiler("silent.sh", "exit 0")));
  ASSERT_THAT(silent, IsOk());
  EXPECT_THAT(silent->CompileSharedObject("int x;", HostCpuTarget()),
              StatusIs(StatusCode::kInternal, HasSubstr("no shared object")));
  EXPECT_EQ(LeftoverFolders(), 0u);
}

TEST_F(ToolchainTest, MissingOrForeignCompilersAreNamed) {
  EXPECT_THAT(Toolchain::Probe(Options("/nonexistent/c++")),
              StatusIs(StatusCode::kNotFound, HasSubstr("/nonexistent/c++")));
  EXPECT_THAT(Toolchain::Probe(Options("hlocache-no-such-compiler")),
              StatusIs(StatusCode::kNotFound, HasSubstr("PATH")));
  const fs::path odd = root_ / "odd.sh";
  std::ofstream(odd) << "#!/bin/sh\necho 'Some Other Compiler 1.0'\n";
  fs::permissions(odd, fs::perms::owner_all);
  EXPECT_THAT(Toolchain::Probe(Options(odd.string())),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("neither GCC nor Clang")));
}

}  // namespace
}  // namespace hlocache::compiler
