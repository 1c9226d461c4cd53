// Preludes compiled once (compiler/prelude_cache.h): made on the first compile, read by later
// ones in place of the text, made again when damaged, and never the cause of a failed compile.
#include "compiler/prelude_cache.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/hlo/parser.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A prelude with a function the units call, and enough standard library to be worth keeping.
constexpr const char* kPrelude =
    "#include <cmath>\n#include <cstdint>\n#include <algorithm>\n"
    "inline long prelude_square(long x) { return x * x; }\n";

std::string Unit(long add) {
  return std::string(kPrelude) +
         "extern \"C\" __attribute__((visibility(\"default\"))) long hlocache_entry(long x) {\n"
         "  return prelude_square(x) + " +
         std::to_string(add) + ";\n}\n";
}

class PreludeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlocache-prelude-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "tmp");
    ToolchainOptions o;
    o.temp_root = root_ / "tmp";
    o.prelude_cache = root_ / "preludes";
    o.object_cache = "-";  // Every compile runs the compiler, which must find the header.
    auto tc = Toolchain::Probe(o);
    ASSERT_THAT(tc, IsOk());
    if (!tc->version().starts_with("gcc-")) GTEST_SKIP() << "precompiled preludes are GCC's";
    toolchain_.emplace(std::move(*tc));
  }
  void TearDown() override { fs::remove_all(root_); }

  // Compiles Unit(add) with the prelude and returns what its entry gives for `x`.
  long Run(long add, long x) {
    const std::vector<std::string> units = {Unit(add)};
    auto so = toolchain_->CompileSharedObject(units, HostCpuTarget(), kPrelude);
    EXPECT_THAT(so, IsOk());
    if (!so) return -1;
    auto library = InMemoryLibrary::Open(*so, "prelude-test");
    EXPECT_THAT(library, IsOk());
    if (!library) return -1;
    auto entry = reinterpret_cast<long (*)(long)>(::dlsym(library->handle(), "hlocache_entry"));
    return entry == nullptr ? -1 : entry(x);
  }
  // The folders of precompiled preludes.
  std::vector<fs::path> Folders() const {
    std::vector<fs::path> out;
    if (!fs::exists(root_ / "preludes")) return out;
    for (const auto& e : fs::directory_iterator(root_ / "preludes")) {
      if (e.is_directory()) out.push_back(e.path());
    }
    return out;
  }

  fs::path root_;
  std::optional<Toolchain> toolchain_;
};

TEST_F(PreludeCacheTest, APreludeIsPrecompiledOnceAndReadInPlaceOfItsText) {
  EXPECT_EQ(Run(1, 7), 50);
  std::vector<fs::path> folders = Folders();
  ASSERT_EQ(folders.size(), 1u);
  const fs::path gch = folders[0] / "prelude.h.gch";
  ASSERT_TRUE(fs::is_regular_file(gch));
  struct stat before {};
  ASSERT_EQ(::stat(gch.c_str(), &before), 0);

  // Another module: the same precompiled header, not made again.
  EXPECT_EQ(Run(2, 3), 11);
  struct stat after {};
  ASSERT_EQ(::stat(gch.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  // With the header's text made unreadable, a compile still succeeds, and the folder stays:
  // the compiler read the precompiled header, not the text (nor fell back to the whole unit).
  std::ofstream(folders[0] / "prelude.h", std::ios::trunc) << "#error the text was read\n";
  EXPECT_EQ(Run(3, 4), 19);
  EXPECT_EQ(Folders().size(), 1u);
}

TEST_F(PreludeCacheTest, ADamagedPrecompiledHeaderIsMadeAgain) {
  EXPECT_EQ(Run(1, 2), 5);
  ASSERT_EQ(Folders().size(), 1u);
  const fs::path folder = Folders()[0];
  // Both the precompiled header and its text damaged: the compile with them fails, the whole
  // unit compiles, and the folder is dropped ...
  std::ofstream(folder / "prelude.h.gch", std::ios::trunc | std::ios::binary) << "not a header";
  std::ofstream(folder / "prelude.h", std::ios::trunc) << "#error damaged\n";
  EXPECT_EQ(Run(5, 2), 9);
  EXPECT_FALSE(fs::exists(folder));
  // ... and made again, whole, by the next compile.
  EXPECT_EQ(Run(6, 2), 10);
  ASSERT_EQ(Folders().size(), 1u);
  EXPECT_GT(fs::file_size(Folders()[0] / "prelude.h.gch"), 1000u);
}

TEST_F(PreludeCacheTest, WithoutAUsableCacheTheWholeTextIsCompiled) {
  // The cache's root cannot be made (a file is in the way).
  std::ofstream(root_ / "in-the-way") << "x";
  ToolchainOptions o;
  o.temp_root = root_ / "tmp";
  o.prelude_cache = root_ / "in-the-way" / "preludes";
  o.object_cache = "-";
  auto blocked = Toolchain::Probe(o);
  ASSERT_THAT(blocked, IsOk());
  const std::vector<std::string> units = {Unit(1)};
  EXPECT_THAT(blocked->CompileSharedObject(units, HostCpuTarget(), kPrelude), IsOk());
  // Units that do not begin with the prelude are compiled whole, and nothing is made.
  const std::vector<std::string> other = {"extern \"C\" int f() { return 1; }\n"};
  EXPECT_THAT(toolchain_->CompileSharedObject(other, HostCpuTarget(), kPrelude), IsOk());
  EXPECT_TRUE(Folders().empty());
}

TEST_F(PreludeCacheTest, AUnitThatDoesNotCompileFailsWithItsOwnErrorAndKeepsTheHeader) {
  EXPECT_EQ(Run(1, 1), 2);
  ASSERT_EQ(Folders().size(), 1u);
  const std::vector<std::string> broken = {std::string(kPrelude) +
                                           "long g() { return undeclared_name; }\n"};
  EXPECT_THAT(toolchain_->CompileSharedObject(broken, HostCpuTarget(), kPrelude),
              StatusIs(StatusCode::kInternal, HasSubstr("undeclared_name")));
  EXPECT_EQ(Folders().size(), 1u) << "a good precompiled header was dropped for a unit's error";
}

TEST_F(PreludeCacheTest, CompilesAtOnceMakeOneFolder) {
  std::vector<long> results(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] { results[t] = Run(static_cast<long>(t), 10); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < results.size(); ++t) EXPECT_EQ(results[t], 100 + static_cast<long>(t));
  EXPECT_EQ(Folders().size(), 1u);
  size_t making = 0;
  for (const auto& e : fs::directory_iterator(root_ / "preludes")) {
    making += e.path().filename().string().starts_with("making-");
  }
  EXPECT_EQ(making, 0u);
}

TEST_F(PreludeCacheTest, OnlyTheMostRecentlyUsedPreludesAreKept) {
  fs::path first;
  for (size_t i = 0; i < kMaxPreludes + 2; ++i) {
    const std::string prelude = "inline int version() { return " + std::to_string(i) + "; }\n";
    const std::vector<std::string> units = {prelude + "int f() { return version(); }\n"};
    ASSERT_THAT(toolchain_->CompileSharedObject(units, HostCpuTarget(), prelude), IsOk());
    if (i == 0) first = Folders().at(0);
  }
  EXPECT_EQ(Folders().size(), kMaxPreludes);
  EXPECT_FALSE(fs::exists(first)) << "the least recently used prelude was kept";
}

TEST_F(PreludeCacheTest, TheCpuGeneratorsModulesReadThePrecompiledPrelude) {
  auto module = hlo::ParseModule(
      "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n",
      "m.hlo");
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(BuildArtifact(*module, *toolchain_, {"k", HostCpuTarget()}), IsOk());
  ASSERT_EQ(Folders().size(), 1u);
  EXPECT_TRUE(fs::exists(Folders()[0] / "prelude.h.gch"));
}

}  // namespace
}  // namespace hlocache::compiler
