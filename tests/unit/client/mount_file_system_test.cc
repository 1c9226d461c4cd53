// mount::FileSystem without FUSE: the calls FUSE would make, on a local store alone.
#include "client/mount/file_system.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/fs.h>

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <future>
#include <thread>

#include "cache/key.h"
#include "client/mount/names.h"
#include "server/file_listing.h"
#include "server/upstream.h"
#include "tests/integration/test_directory.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::mount {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

class FileSystemTest : public testing::TestDirectory {
 protected:
  // With `fleet_url`, the fleet's server behind the local store.
  std::unique_ptr<FileSystem> Make(bool read_only = false, uint64_t max_bytes = 0,
                                   const std::string& fleet_url = "") {
    cache::StoreOptions store_options;
    store_options.min_free_bytes = 0;
    store_options.max_bytes = max_bytes;
    auto store = cache::Store::Open(root_ / "store", store_options);
    EXPECT_THAT(store, IsOk());
    store_ = store->get();
    FileSystemOptions options;
    options.read_only = read_only;
    options.state_dir = root_ / "state";
    options.invalidate = [this](const std::string& path) { invalidated_.push_back(path); };
    std::unique_ptr<server::Upstream> upstream;
    if (!fleet_url.empty()) {
      server::UpstreamOptions upstream_options;
      upstream_options.url = fleet_url;
      auto made = server::Upstream::Make(std::move(upstream_options), **store);
      EXPECT_THAT(made, IsOk());
      if (made) upstream = std::move(*made);
    }
    auto fs = FileSystem::Make(std::move(options), std::move(*store), std::move(upstream));
    EXPECT_THAT(fs, IsOk());
    return std::move(*fs);
  }

  // create, write, close (flush and release): 0 or the first negated errno.
  int WriteFile(FileSystem& fs, const char* path, const std::string& data) {
    uint64_t fh = 0;
    if (int err = fs.Create(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &fh); err != 0) return err;
    int err = data.empty() ? 0 : fs.Write(fh, data.data(), data.size(), 0);
    if (err >= 0) err = fs.Flush(fh, 0);
    fs.Release(fh);
    return err < 0 ? err : 0;
  }

  std::string ReadFile(FileSystem& fs, const char* path, int* err = nullptr) {
    uint64_t fh = 0;
    int e = fs.Open(path, O_RDONLY, &fh);
    std::string out;
    while (e == 0) {
      char buf[70000];
      const int n = fs.Read(fh, buf, sizeof buf, static_cast<off_t>(out.size()));
      if (n < 0) e = n;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    if (fh != 0) fs.Release(fh);
    if (err != nullptr) *err = e;
    return out;
  }

  std::vector<std::string> Names(FileSystem& fs, const char* dir) {
    std::vector<DirEntry> entries;
    EXPECT_EQ(fs.ReadDir(dir, &entries), 0);
    std::vector<std::string> names;
    for (const DirEntry& e : entries) {
      if (e.name != "." && e.name != "..") names.push_back(e.name);
    }
    return names;
  }

  std::vector<std::string> Stored() {
    auto listed = server::ListStoreFiles(*store_, "files", "");
    EXPECT_THAT(listed, IsOk());
    std::vector<std::string> paths;
    for (const auto& e : *listed) paths.push_back(e.path);
    return paths;
  }

  static std::string Bytes(size_t n, int seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) >> 3);
    return s;
  }

  cache::Store* store_ = nullptr;
  std::vector<std::string> invalidated_;
};

TEST_F(FileSystemTest, AWrittenFileIsStoredOnCloseAndReadsBackWhole) {
  auto fs = Make();
  const std::string big = Bytes((9 << 20) + 5, 1);  // Three store chunks.
  ASSERT_EQ(fs->Mkdir("/dir", 0755), 0);
  ASSERT_EQ(WriteFile(*fs, "/dir/big.bin", big), 0);
  ASSERT_EQ(WriteFile(*fs, "/empty", ""), 0);
  struct stat st {};
  ASSERT_EQ(fs->GetAttr("/dir/big.bin", &st, 0), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(static_cast<size_t>(st.st_size), big.size());
  ASSERT_EQ(fs->GetAttr("/dir", &st, 0), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(ReadFile(*fs, "/dir/big.bin") == big);
  EXPECT_EQ(ReadFile(*fs, "/empty"), "");
  EXPECT_THAT(Stored(), ElementsAre("dir/big.bin", "empty"));
  EXPECT_THAT(Names(*fs, "/"), UnorderedElementsAre("dir", "empty"));
  EXPECT_THAT(Names(*fs, "/dir"), ElementsAre("big.bin"));
  // Reads in any order: backwards starts the verified stream again.
  uint64_t fh = 0;
  ASSERT_EQ(fs->Open("/dir/big.bin", O_RDONLY, &fh), 0);
  char tail[10], head[10];
  ASSERT_EQ(fs->Read(fh, tail, sizeof tail, static_cast<off_t>(big.size() - 10)), 10);
  ASSERT_EQ(fs->Read(fh, head, sizeof head, 0), 10);
  EXPECT_EQ(std::string(tail, 10), big.substr(big.size() - 10));
  EXPECT_EQ(std::string(head, 10), big.substr(0, 10));
  EXPECT_EQ(fs->Read(fh, head, sizeof head, static_cast<off_t>(big.size())), 0);
  fs->Release(fh);
}

TEST_F(FileSystemTest, AFileBeingWrittenIsInvisibleToReadersUntilClosed) {
  auto fs = Make();
  uint64_t fh = 0;
  ASSERT_EQ(fs->Create("/p", O_WRONLY | O_CREAT, 0644, &fh), 0);
  ASSERT_EQ(fs->Write(fh, "part", 4, 0), 4);
  struct stat st {};
  ASSERT_EQ(fs->GetAttr(nullptr, &st, fh), 0) << "the writer sees its own file";
  EXPECT_EQ(st.st_size, 4);
  uint64_t reader = 0;
  EXPECT_EQ(fs->Open("/p", O_RDONLY, &reader), -ENOENT) << "a reader never sees part of it";
  EXPECT_TRUE(Stored().empty());
  ASSERT_EQ(fs->Write(fh, "-whole", 6, 4), 6);
  ASSERT_EQ(fs->Flush(fh, 0), 0);
  fs->Release(fh);
  EXPECT_EQ(ReadFile(*fs, "/p"), "part-whole");
}

// A lookup that asked the fleet before a file was committed here, and was answered after, must
// not remember the miss it saw: the committed file would be hidden for the negative TTL (a
// reader racing a writer's close saw "no such file" after the close had returned).
TEST_F(FileSystemTest, ALookupAnsweredAfterACommitDoesNotHideTheCommittedFile) {
  httplib::Server fleet;
  std::atomic<bool> first{true};
  std::promise<void> asked, answer;
  std::shared_future<void> answered = answer.get_future().share();
  fleet.set_default_headers({});
  auto not_found = [&](const httplib::Request&, httplib::Response& res) {
    if (first.exchange(false)) {
      asked.set_value();
      answered.wait();
    }
    res.status = 404;
  };
  fleet.Get(".*", not_found);
  const int port = fleet.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { fleet.listen_after_bind(); });
  {
    auto fs = Make(false, 0, "http://127.0.0.1:" + std::to_string(port));
    struct stat st {};
    std::future<int> early = std::async(std::launch::async, [&] {
      struct stat seen {};
      return fs->GetAttr("/late", &seen, 0);
    });
    asked.get_future().wait();  // The early lookup is waiting on the fleet.
    ASSERT_EQ(WriteFile(*fs, "/late", "bytes"), 0);
    answer.set_value();
    EXPECT_EQ(early.get(), -ENOENT);  // It began before the file existed.
    ASSERT_EQ(fs->GetAttr("/late", &st, 0), 0) << "the committed file is hidden";
    EXPECT_EQ(st.st_size, 5);
  }
  fleet.stop();
  serving.join();
}

TEST_F(FileSystemTest, TwoWritersOfOneNameEndWithTheFirstWholeFile) {
  auto fs = Make();
  uint64_t a = 0, b = 0;
  ASSERT_EQ(fs->Create("/same", O_WRONLY | O_CREAT, 0644, &a), 0);
  ASSERT_EQ(fs->Create("/same", O_WRONLY | O_CREAT, 0644, &b), 0);
  ASSERT_EQ(fs->Write(a, "aaaa", 4, 0), 4);
  ASSERT_EQ(fs->Write(b, "bbbbbbbb", 8, 0), 8);
  ASSERT_EQ(fs->Flush(b, 0), 0);
  ASSERT_EQ(fs->Flush(a, 0), 0);
  fs->Release(a);
  fs->Release(b);
  EXPECT_EQ(ReadFile(*fs, "/same"), "bbbbbbbb") << "the first committed, never a mix";
}

TEST_F(FileSystemTest, AFileIsStoredWhenClosedAfterItsWritesWhateverClosedBefore) {
  auto fs = Make();
  // A shell's redirection or dd: the descriptor the file was created on is closed (dup'ed
  // elsewhere) before anything is written.
  uint64_t fh = 0;
  ASSERT_EQ(fs->Create("/redirected", O_WRONLY | O_CREAT | O_TRUNC, 0644, &fh), 0);
  ASSERT_EQ(fs->Flush(fh, 0), 0);
  EXPECT_TRUE(Stored().empty()) << "nothing is stored before anything is written";
  ASSERT_EQ(fs->Write(fh, "part", 4, 0), 4);
  ASSERT_EQ(fs->Flush(fh, 0), 0);  // A dup closed after the first write...
  EXPECT_EQ(ReadFile(*fs, "/redirected"), "part");
  ASSERT_EQ(fs->Write(fh, "-whole", 6, 4), 6);  // ...and the last one after the rest.
  ASSERT_EQ(fs->Flush(fh, 0), 0);
  ASSERT_EQ(fs->Release(fh), 0);
  EXPECT_EQ(ReadFile(*fs, "/redirected"), "part-whole") << "the handle's last content";
  // An empty file is stored when its last descriptor goes.
  ASSERT_EQ(fs->Create("/empty", O_WRONLY | O_CREAT, 0644, &fh), 0);
  ASSERT_EQ(fs->Flush(fh, 0), 0);
  EXPECT_THAT(Stored(), ElementsAre("redirected"));
  ASSERT_EQ(fs->Release(fh), 0);
  EXPECT_THAT(Stored(), ElementsAre("empty", "redirected"));
}

TEST_F(FileSystemTest, HostLocalNamesStayOnTheHostAndRenameCommitsTheFinalName) {
  auto fs = Make();
  ASSERT_EQ(fs->Mkdir("/k", 0755), 0);
  ASSERT_EQ(WriteFile(*fs, "/k/.lockfile", ""), 0);
  ASSERT_EQ(WriteFile(*fs, "/k/abc-atime", "12345678"), 0);
  ASSERT_EQ(fs->Mkdir("/k/tmp.pid_1_ab", 0755), 0);
  ASSERT_EQ(WriteFile(*fs, "/k/tmp.pid_1_ab/kernel.cubin", "cubin"), 0);
  ASSERT_EQ(WriteFile(*fs, "/k/.1.2.tmp", "inductor"), 0);
  EXPECT_TRUE(Stored().empty()) << "nothing host-local is stored";
  EXPECT_EQ(ReadFile(*fs, "/k/abc-atime"), "12345678");
  ASSERT_EQ(fs->Rename("/k/tmp.pid_1_ab/kernel.cubin", "/k/kernel.cubin", 0), 0);
  ASSERT_EQ(fs->Rename("/k/.1.2.tmp", "/k/graph.py", RENAME_NOREPLACE), 0);
  ASSERT_EQ(fs->Rmdir("/k/tmp.pid_1_ab"), 0);
  EXPECT_THAT(Stored(), ElementsAre("k/graph.py", "k/kernel.cubin"));
  EXPECT_EQ(ReadFile(*fs, "/k/kernel.cubin"), "cubin");
  EXPECT_THAT(Names(*fs, "/k"),
              UnorderedElementsAre(".lockfile", "abc-atime", "graph.py", "kernel.cubin"));
  EXPECT_EQ(fs->Rmdir("/k"), -ENOTEMPTY);
  EXPECT_EQ(fs->Rename("/k/graph.py", "/k/moved.py", 0), -EXDEV) << "stored names stay put";
  EXPECT_EQ(WriteFile(*fs, "/k/x.tmp", "again"), 0);
  EXPECT_EQ(fs->Rename("/k/x.tmp", "/k/graph.py", RENAME_NOREPLACE), -EEXIST);
}

TEST_F(FileSystemTest, UnlinkForgetsTheNameHereAndARewriteBringsItBack) {
  auto fs = Make();
  ASSERT_EQ(WriteFile(*fs, "/x.bin", "first"), 0);
  invalidated_.clear();
  ASSERT_EQ(fs->Unlink("/x.bin"), 0);
  EXPECT_THAT(invalidated_, ElementsAre("x.bin")) << "the kernel's copy is dropped";
  struct stat st {};
  EXPECT_EQ(fs->GetAttr("/x.bin", &st, 0), -ENOENT);
  EXPECT_TRUE(Stored().empty());
  EXPECT_EQ(fs->Unlink("/x.bin"), -ENOENT);
  ASSERT_EQ(WriteFile(*fs, "/x.bin", "second"), 0);
  EXPECT_EQ(ReadFile(*fs, "/x.bin"), "second");
}

TEST_F(FileSystemTest, RefusalsGetAnErrnoAndStoreNothing) {
  auto fs = Make(/*read_only=*/false, /*max_bytes=*/1 << 20);
  const std::string long_name = "/" + std::string(256, 'n');
  EXPECT_EQ(WriteFile(*fs, long_name.c_str(), "x"), -ENAMETOOLONG);
  EXPECT_EQ(WriteFile(*fs, "/bad\xff", "x"), -EILSEQ);
  uint64_t fh = 0;
  ASSERT_EQ(fs->Create("/huge", O_WRONLY | O_CREAT, 0644, &fh), 0);
  const std::string mib(1 << 20, 'h');
  EXPECT_EQ(fs->Write(fh, mib.data(), mib.size(), 0), -EFBIG) << "over the store's cap";
  fs->Release(fh);
  EXPECT_TRUE(Stored().empty());
  ASSERT_EQ(WriteFile(*fs, "/ok", "fine"), 0);
  uint64_t rw = 0;
  ASSERT_EQ(fs->Open("/ok", O_RDONLY, &rw), 0);
  EXPECT_EQ(fs->Write(rw, "x", 1, 0), -EBADF) << "a read handle does not write";
  fs->Release(rw);
  EXPECT_EQ(fs->Truncate("/ok", 0, 0), -EPERM) << "a stored file does not change in place";
}

TEST_F(FileSystemTest, AReadOnlyFileSystemRefusesEveryChangeAndServesReads) {
  { ASSERT_EQ(WriteFile(*Make(), "/kept", "kept"), 0); }
  auto fs = Make(/*read_only=*/true);
  EXPECT_EQ(ReadFile(*fs, "/kept"), "kept");
  uint64_t fh = 0;
  EXPECT_EQ(fs->Create("/new", O_WRONLY | O_CREAT, 0644, &fh), -EROFS);
  EXPECT_EQ(fs->Open("/kept", O_WRONLY, &fh), -EROFS);
  EXPECT_EQ(fs->Open("/kept", O_RDONLY | O_TRUNC, &fh), -EROFS);
  EXPECT_EQ(fs->Unlink("/kept"), -EROFS);
  EXPECT_EQ(fs->Mkdir("/d", 0755), -EROFS);
  EXPECT_EQ(fs->Rmdir("/d"), -EROFS);
  EXPECT_EQ(fs->Rename("/kept", "/k2", 0), -EROFS);
  EXPECT_EQ(fs->Truncate("/kept", 0, 0), -EROFS);
  struct stat st {};
  ASSERT_EQ(fs->GetAttr("/kept", &st, 0), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
}

TEST_F(FileSystemTest, ALocalCopyWithAFlippedByteReadsAsEioNeverBadBytes) {
  const std::string data = Bytes(6 << 20, 3);
  { ASSERT_EQ(WriteFile(*Make(), "/x", data), 0); }
  const auto large = root_ / "store" / "large";
  const auto blob = std::filesystem::directory_iterator(large)->path();
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5 << 20);
    f.put('!');
  }
  auto fs = Make();
  int err = 0;
  const std::string got = ReadFile(*fs, "/x", &err);
  EXPECT_EQ(err, -EIO);
  EXPECT_LT(got.size(), size_t{5} << 20) << "nothing from the bad chunk on was handed out";
  EXPECT_TRUE(got == data.substr(0, got.size())) << "and what was is good";
}

TEST(NamesTest, RelativeParentAndLocalPatterns) {
  EXPECT_EQ(Relative("/a/b"), "a/b");
  EXPECT_EQ(Relative("/"), "");
  EXPECT_EQ(Parent("a/b/c"), "a/b");
  EXPECT_EQ(Parent("a"), "");
  const LocalNames names(DefaultLocalPatterns());
  for (const char* local :
       {".lockfile", "jax/k-atime", "x.lock", "a/.1.2.tmp", "t/key/tmp.pid_7_abc/kernel.cubin"}) {
    EXPECT_TRUE(names.IsLocal(local)) << local;
  }
  for (const char* shared : {"jax/k-cache", "graph1.bin", "t/key/kernel.cubin", "tmpdir/x"}) {
    EXPECT_FALSE(names.IsLocal(shared)) << shared;
  }
}

TEST(FileListingTest, FormatsParsesAndMergesInPathOrder) {
  const std::vector<server::FileEntry> a = {{"a", 1, "k1"}, {"c", 3, "k3"}};
  const std::vector<server::FileEntry> b = {{"b", 2, "k2"}, {"c", 9, "k9"}, {"d", 4, "k4"}};
  auto parsed = server::ParseFileListing(server::FormatFileListing(a));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(*parsed, a);
  const auto merged = server::MergeFileListings(a, b);
  ASSERT_EQ(merged.size(), 4u);
  EXPECT_EQ(merged[1].path, "b");
  EXPECT_EQ(merged[2].size, 3u) << "the first list's entry wins";
  EXPECT_THAT(server::ParseFileListing("{\"path\": 1}\n"), StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hlocache::mount
