// The object cache (compiler/object_cache.h) and the toolchain's use of it: a unit compiled
// before is not compiled again, a changed unit is, and a damaged entry is never used.
#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "compiler/object_cache.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "tests/integration/test_directory.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;

// A unit defining `int name()` that returns `value`, callable from outside its shared object.
std::string Function(const std::string& name, int value) {
  return "extern \"C\" __attribute__((visibility(\"default\"))) int " + name + "() { return " +
         std::to_string(value) + "; }\n";
}

class ObjectCacheTest : public testing::TestDirectory {
 protected:
  void SetUp() override {
    TestDirectory::SetUp();
    fs::create_directories(root_ / "tmp");
  }

  // A compiler that logs each of its command lines, then runs the real one.
  ToolchainOptions LoggingToolchain() {
    const fs::path script = root_ / "logging-c++";
    std::ofstream(script) << "#!/bin/sh\necho \"$*\" >> '" << (root_ / "log").string()
                          << "'\nexec c++ \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    ToolchainOptions o;
    o.cxx = script.string();
    o.temp_root = root_ / "tmp";
    o.prelude_cache = "-";
    o.object_cache = root_ / "objects";
    return o;
  }
  // The compiler's command lines since the last call, --version aside.
  std::vector<std::string> Runs() {
    std::vector<std::string> runs;
    std::ifstream in(root_ / "log");
    for (std::string line; std::getline(in, line);) {
      if (line != "--version") runs.push_back(line);
    }
    fs::remove(root_ / "log");
    return runs;
  }
  static int Count(const std::vector<std::string>& runs, const std::string& part) {
    int n = 0;
    for (const std::string& r : runs) n += r.find(part) != std::string::npos;
    return n;
  }
  // What `symbol` (an int function) returns in the shared object `so`.
  int Call(const std::string& so, const char* symbol) {
    const fs::path path = root_ / ("lib" + std::to_string(loaded_++) + ".so");
    std::ofstream(path, std::ios::binary) << so;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return -1;
    auto* f = reinterpret_cast<int (*)()>(::dlsym(lib, symbol));
    const int r = f != nullptr ? f() : -1;
    ::dlclose(lib);
    return r;
  }
  static std::vector<fs::path> Entries(const fs::path& root) {
    std::vector<fs::path> entries;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (e.is_regular_file()) entries.push_back(e.path());
    }
    return entries;
  }

  int loaded_ = 0;
};

TEST_F(ObjectCacheTest, WhatIsStoredIsFoundByItsKeyAlone) {
  const ObjectCache cache(root_ / "objects", 1 << 20);
  EXPECT_FALSE(cache.Find("a").has_value());
  cache.Store("a", std::string("bytes of a\0with a zero", 22));
  cache.Store("b", "bytes of b");
  ASSERT_TRUE(cache.Find("a").has_value());
  EXPECT_EQ(*cache.Find("a"), std::string("bytes of a\0with a zero", 22));
  EXPECT_EQ(*cache.Find("b"), "bytes of b");
  EXPECT_FALSE(cache.Find("c").has_value());
  // Nothing left aside.
  EXPECT_EQ(Entries(root_ / "objects").size(), 2u);
}

TEST_F(ObjectCacheTest, ADamagedEntryIsAMissAndIsRemoved) {
  const ObjectCache cache(root_ / "objects", 1 << 20);
  const std::string body(4096, 'x');
  for (const char* key : {"flipped", "truncated", "emptied"}) cache.Store(key, body);
  {
    std::fstream f(cache.PathOf("flipped"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('y');
  }
  fs::resize_file(cache.PathOf("truncated"), 2000);
  fs::resize_file(cache.PathOf("emptied"), 0);
  for (const char* key : {"flipped", "truncated", "emptied"}) {
    EXPECT_FALSE(cache.Find(key).has_value()) << key;
    EXPECT_FALSE(fs::exists(cache.PathOf(key))) << key;
  }
}

TEST_F(ObjectCacheTest, StoresKeepTheMostRecentlyUsedWithinTheBound) {
  const std::string body(1000, 'z');
  {
    const ObjectCache big(root_ / "objects", 1 << 30);
    for (int i = 0; i < 20; ++i) big.Store("key" + std::to_string(i), body);
    // Used at distinct times, oldest first.
    for (int i = 0; i < 20; ++i) {
      const timespec at[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
      ::utimensat(AT_FDCWD, big.PathOf("key" + std::to_string(i)).c_str(), at, 0);
    }
    // key0, the oldest, is read: now the most recently used.
    ASSERT_TRUE(big.Find("key0").has_value());
  }
  // Room for about ten entries: a store removes the least recently used (key1, key2, ...).
  const ObjectCache small(root_ / "objects", 10 * 1016);
  small.Store("new", body);
  const std::vector<fs::path> left = Entries(root_ / "objects");
  uint64_t total = 0;
  for (const fs::path& p : left) total += fs::file_size(p);
  EXPECT_LE(total, 10u * 1016);
  EXPECT_GE(left.size(), 8u);
  EXPECT_TRUE(small.Find("key0").has_value());
  EXPECT_TRUE(small.Find("new").has_value());
  EXPECT_TRUE(small.Find("key19").has_value());
  EXPECT_FALSE(small.Find("key1").has_value());
  EXPECT_FALSE(small.Find("key2").has_value());
}

TEST_F(ObjectCacheTest, WithoutARootNothingIsKept) {
  const ObjectCache none({}, 1 << 20);
  EXPECT_FALSE(none.enabled());
  none.Store("a", "bytes");
  EXPECT_FALSE(none.Find("a").has_value());
}

TEST_F(ObjectCacheTest, AToolchainCompilesOnlyTheUnitsItHasNotCompiledBefore) {
  auto tc = Toolchain::Probe(LoggingToolchain());
  ASSERT_THAT(tc, IsOk());
  const std::string f = Function("f", 1);
  const std::string g = Function("g", 2);
  const std::string g3 = Function("g", 3);
  Runs();

  auto first = tc->CompileSharedObject(std::vector<std::string>{f, g}, HostCpuTarget());
  ASSERT_THAT(first, IsOk());
  std::vector<std::string> runs = Runs();
  EXPECT_EQ(Count(runs, " -c "), 2);
  EXPECT_EQ(Call(*first, "g"), 2);

  // The same units again: linked from the cache, not compiled.
  auto again = tc->CompileSharedObject(std::vector<std::string>{f, g}, HostCpuTarget());
  ASSERT_THAT(again, IsOk());
  runs = Runs();
  EXPECT_EQ(Count(runs, " -c "), 0);
  EXPECT_EQ(Count(runs, "-shared"), 1);  // The link.
  EXPECT_EQ(Call(*again, "f"), 1);
  EXPECT_EQ(Call(*again, "g"), 2);

  // One unit changed: only it is compiled.
  auto changed = tc->CompileSharedObject(std::vector<std::string>{f, g3}, HostCpuTarget());
  ASSERT_THAT(changed, IsOk());
  runs = Runs();
  ASSERT_EQ(Count(runs, " -c "), 1);
  EXPECT_EQ(Call(*changed, "g"), 3);

  // Another target's flags are another key.
  const std::string other = HostCpuTarget() == "cpu-x86-64-v2" ? "cpu-x86-64-v3" : "cpu-x86-64-v2";
  ASSERT_THAT(tc->CompileSharedObject(std::vector<std::string>{f, g}, other), IsOk());
  EXPECT_EQ(Count(Runs(), " -c "), 2);
}

TEST_F(ObjectCacheTest, ASingleUnitsSharedObjectIsKeptWhole) {
  ToolchainOptions options = LoggingToolchain();
  auto tc = Toolchain::Probe(options);
  ASSERT_THAT(tc, IsOk());
  const std::string unit = Function("h", 7);
  Runs();
  auto first = tc->CompileSharedObject(unit, HostCpuTarget());
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(Runs().size(), 1u);
  auto again = tc->CompileSharedObject(unit, HostCpuTarget());
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(Runs().empty()) << "the compiler ran for a unit it had compiled";
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(Call(*again, "h"), 7);

  // A damaged entry is compiled again, and the damage never reaches the caller.
  const std::vector<fs::path> entries = Entries(options.object_cache);
  ASSERT_EQ(entries.size(), 1u);
  fs::resize_file(entries[0], fs::file_size(entries[0]) / 2);
  auto rebuilt = tc->CompileSharedObject(unit, HostCpuTarget());
  ASSERT_THAT(rebuilt, IsOk());
  EXPECT_EQ(Runs().size(), 1u);
  EXPECT_EQ(Call(*rebuilt, "h"), 7);

  // A compile that fails is not kept: it fails again, with the compiler's error.
  const std::string broken = Function("h", 7) + "}";
  EXPECT_FALSE(tc->CompileSharedObject(broken, HostCpuTarget()).has_value());
  EXPECT_FALSE(tc->CompileSharedObject(broken, HostCpuTarget()).has_value());
  EXPECT_EQ(Runs().size(), 2u);
}

}  // namespace
}  // namespace hlocache::compiler
