#include "cache/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "cache/blob_format.h"
#include "cache/dir_lock.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

std::string KeyOf(uint64_t i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "v1-%016llx%016llx", 0x5eedull,
                static_cast<unsigned long long>(i));
  return buf;
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

ArtifactInfo Info(std::string graph = "g") {
  return ArtifactInfo{"cpu-x86-64-v3", "gcc-12.2.0/hlocache-codegen-1/O2", std::move(graph), 1.5};
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlocache-store-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "store";
  }
  void TearDown() override { fs::remove_all(root_); }

  StoreOptions Options() {
    StoreOptions o;
    o.min_free_bytes = 0;
    o.chunk_bytes = 64 << 10;
    o.log = [this](std::string_view line) { log_.emplace_back(line); };
    return o;
  }
  std::unique_ptr<Store> OpenStore(StoreOptions o) {
    auto store = Store::Open(dir_, std::move(o));
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
    return store ? std::move(*store) : nullptr;
  }
  std::unique_ptr<Store> OpenStore() { return OpenStore(Options()); }
  // A store capped at 10 000 bytes, evicting down to half, that holds ten 1000-byte entries,
  // KeyOf(0) to KeyOf(9), put in that order with distinct access times.
  std::unique_ptr<Store> OpenFullStoreOfTen() {
    StoreOptions o = Options();
    o.max_bytes = 10 * 1000;
    o.high_water = 1.0;
    o.low_water = 0.5;
    auto store = OpenStore(o);
    for (int i = 0; store && i < 10; ++i) {
      EXPECT_TRUE(store->Put(KeyOf(i), Bytes(1000, i), Info()).has_value()) << i;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    return store;
  }

  fs::path root_, dir_;
  std::vector<std::string> log_;
};

std::string ReadAll(ArtifactReader& reader) {
  std::string out;
  while (true) {
    auto chunk = reader.Next();
    EXPECT_TRUE(chunk.has_value()) << chunk.error().ToString();
    if (!chunk || chunk->empty()) return out;
    out.append(chunk->data(), chunk->size());
  }
}

TEST_F(StoreTest, PutThenGetWholeAndStreamedAcrossChunkBoundaries) {
  auto store = OpenStore();
  // Empty, inline, exactly one chunk (still inline), one byte more (two chunks), many chunks.
  const std::vector<size_t> sizes = {0, 100, 64 << 10, (64 << 10) + 1, 1000 * 1000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string bytes = Bytes(sizes[i], i);
    auto put = store->Put(KeyOf(i), bytes, Info());
    ASSERT_TRUE(put.has_value()) << put.error().ToString();
    EXPECT_EQ(*put, PutOutcome::kStored);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string bytes = Bytes(sizes[i], i);
    auto got = store->Get(KeyOf(i));
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    ASSERT_TRUE(got->has_value()) << "size " << sizes[i];
    EXPECT_EQ(**got, bytes) << "size " << sizes[i];
    auto reader = store->OpenReader(KeyOf(i));
    ASSERT_TRUE(reader.has_value());
    ASSERT_NE(*reader, nullptr);
    EXPECT_EQ((*reader)->info().size, sizes[i]);
    EXPECT_EQ(ReadAll(**reader), bytes);
  }
  auto stats = store->Stats();
  EXPECT_EQ(stats->entries, sizes.size());
  EXPECT_EQ(stats->puts, sizes.size());
}

TEST_F(StoreTest, MissIsAnEmptyOptionalNotAnError) {
  auto store = OpenStore();
  auto got = store->Get(KeyOf(7));
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  auto reader = store->OpenReader(KeyOf(7));
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(*reader, nullptr);
  EXPECT_FALSE(*store->Contains(KeyOf(7)));
  EXPECT_FALSE(store->Info(KeyOf(7))->has_value());
  EXPECT_EQ(store->Stats()->misses, 2u);
}

TEST_F(StoreTest, MalformedKeysAreRejectedBeforeTouchingStorage) {
  auto store = OpenStore();
  for (std::string bad :
       {"", "v1-", "../../etc/passwd", "v1-0123456789abcdef0123456789ABCDEF",
        "v1-0123456789abcdef0123456789abcdef0", "v2-0123456789abcdef0123456789abcdef"}) {
    EXPECT_THAT(store->Get(bad).error(), StatusIs(StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(store->Put(bad, "x", Info()).error(), StatusIs(StatusCode::kInvalidArgument));
    EXPECT_THAT(store->Erase(bad).error(), StatusIs(StatusCode::kInvalidArgument));
  }
}

TEST_F(StoreTest, StreamedPutIsInvisibleUntilCommitAndDiscardedIfDropped) {
  auto store = OpenStore();
  const std::string bytes = Bytes(300 << 10, 1);
  {
    auto writer = store->StartPut(KeyOf(1), Info());
    ASSERT_TRUE(writer.has_value());
    for (size_t off = 0; off < bytes.size(); off += 10000) {
      ASSERT_THAT((*writer)->Append(std::string_view(bytes).substr(off, 10000)), IsOk());
    }
    EXPECT_FALSE(*store->Contains(KeyOf(1)));
    EXPECT_FALSE(store->Get(KeyOf(1))->has_value());
    // Dropped without Commit.
  }
  EXPECT_FALSE(*store->Contains(KeyOf(1)));
  auto verify = store->VerifyAll();
  ASSERT_TRUE(verify.has_value());
  EXPECT_EQ(verify->orphan_chunks_removed, 0u) << "the writer removed its own chunks";

  auto writer = store->StartPut(KeyOf(1), Info());
  ASSERT_THAT((*writer)->Append(bytes), IsOk());
  EXPECT_EQ(*(*writer)->Commit(), PutOutcome::kStored);
  EXPECT_EQ(**store->Get(KeyOf(1)), bytes);
}

TEST_F(StoreTest, SecondPutOfAKeyKeepsTheFirst) {
  auto store = OpenStore();
  EXPECT_EQ(*store->Put(KeyOf(1), "first", Info()), PutOutcome::kStored);
  EXPECT_EQ(*store->Put(KeyOf(1), "second", Info()), PutOutcome::kAlreadyPresent);
  EXPECT_EQ(**store->Get(KeyOf(1)), "first");
  EXPECT_EQ(store->Stats()->entries, 1u);
}

TEST_F(StoreTest, ConcurrentPutsOfOneKeyEndWithOneIntactEntry) {
  auto store = OpenStore();
  for (int round = 0; round < 10; ++round) {
    const std::string key = KeyOf(100 + round);
    std::vector<std::string> contents;
    for (int t = 0; t < 4; ++t) contents.push_back(Bytes((200 << 10) + t, round * 10 + t));
    std::atomic<int> stored{0}, present{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        auto r = store->Put(key, contents[t], Info());
        ASSERT_TRUE(r.has_value()) << r.error().ToString();
        (*r == PutOutcome::kStored ? stored : present)++;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(stored.load(), 1);
    EXPECT_EQ(present.load(), 3);
    auto got = store->Get(key);
    ASSERT_TRUE(got.has_value() && got->has_value());
    EXPECT_THAT(contents, ::testing::Contains(**got));
  }
  auto verify = store->VerifyAll();
  EXPECT_TRUE(verify->corrupt.empty());
  EXPECT_EQ(verify->orphan_chunks_removed, 0u) << "losers removed their chunks";
  EXPECT_EQ(store->Stats()->entries, 10u);
}

TEST_F(StoreTest, ReadersOfOneKeyAreUndisturbedByWritersOfOthers) {
  auto store = OpenStore();
  const std::string hot = Bytes(150 << 10, 42);
  ASSERT_EQ(*store->Put(KeyOf(0), hot, Info()), PutOutcome::kStored);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop) {
        auto got = store->Get(KeyOf(0));
        if (!got || !got->has_value() || **got != hot) ++bad;
        ++reads;
      }
    });
  }
  for (int i = 1; i <= 200; ++i) {
    ASSERT_TRUE(store->Put(KeyOf(i), Bytes(i * 700, i), Info()).has_value());
    if (i % 3 == 0) {
      ASSERT_TRUE(store->Erase(KeyOf(i - 1)).has_value());
    }
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

TEST_F(StoreTest, StreamingReaderSurvivesEraseOfItsKey) {
  auto store = OpenStore();
  const std::string bytes = Bytes(500 << 10, 3);
  ASSERT_TRUE(store->Put(KeyOf(3), bytes, Info()).has_value());
  auto reader = store->OpenReader(KeyOf(3));
  ASSERT_TRUE(reader.has_value() && *reader);
  auto first = (*reader)->Next();
  ASSERT_TRUE(first.has_value());
  std::string got(first->data(), first->size());
  ASSERT_TRUE(*store->Erase(KeyOf(3)));
  got += ReadAll(**reader);
  EXPECT_EQ(got, bytes);  // Read from the snapshot it started with.
  EXPECT_FALSE(store->Get(KeyOf(3))->has_value());
}

TEST_F(StoreTest, InfoListAndFilters) {
  auto store = OpenStore();
  ASSERT_TRUE(
      store->Put(KeyOf(1), "a", ArtifactInfo{"cpu-x86-64-v3", "c1", "SyncTensorsGraph.316", 2})
          .has_value());
  ASSERT_TRUE(store->Put(KeyOf(2), "bb", ArtifactInfo{"cpu-x86-64-v2", "c1", "jit_train_step", 3})
                  .has_value());
  ASSERT_TRUE(store->Put(KeyOf(3), "ccc", ArtifactInfo{"cpu-x86-64-v3", "c2", "jit_train_step", 4})
                  .has_value());
  auto info = store->Info(KeyOf(2));
  ASSERT_TRUE(info.has_value() && info->has_value());
  EXPECT_EQ((*info)->size, 2u);
  EXPECT_EQ((*info)->artifact.target, "cpu-x86-64-v2");
  EXPECT_EQ((*info)->artifact.graph_name, "jit_train_step");
  EXPECT_DOUBLE_EQ((*info)->artifact.compile_seconds, 3);
  EXPECT_GT((*info)->created_ms, 0);

  auto keys = [&](ListFilter f) {
    std::vector<std::string> out;
    auto listed = store->List(f);
    EXPECT_TRUE(listed.has_value());
    if (!listed) return out;
    for (const EntryInfo& e : *listed) out.push_back(e.key);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_THAT(keys({}), ElementsAre(KeyOf(1), KeyOf(2), KeyOf(3)));
  EXPECT_THAT(keys({.target = "cpu-x86-64-v3"}), ElementsAre(KeyOf(1), KeyOf(3)));
  EXPECT_THAT(keys({.target = "cpu-x86-64-v3", .compiler_id = "c2"}), ElementsAre(KeyOf(3)));
  EXPECT_THAT(keys({.graph_name_contains = "train"}), ElementsAre(KeyOf(2), KeyOf(3)));
  EXPECT_EQ(store->List({.limit = 2})->size(), 2u);
}

TEST_F(StoreTest, EntriesAndCountersSurviveReopen) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Put(KeyOf(1), "one", Info()).has_value());
    ASSERT_TRUE(store->Put(KeyOf(2), Bytes(200 << 10, 2), Info()).has_value());
    ASSERT_TRUE(store->Get(KeyOf(1))->has_value());
    ASSERT_FALSE(store->Get(KeyOf(9))->has_value());
  }
  auto store = OpenStore();
  EXPECT_EQ(**store->Get(KeyOf(1)), "one");
  EXPECT_EQ(**store->Get(KeyOf(2)), Bytes(200 << 10, 2));
  auto stats = store->Stats();
  EXPECT_EQ(stats->entries, 2u);
  EXPECT_EQ(stats->bytes, 3u + (200 << 10));
  EXPECT_EQ(stats->puts, 2u);
  EXPECT_EQ(stats->hits, 3u);
  EXPECT_EQ(stats->misses, 1u);
  ASSERT_THAT(store->Flush(), IsOk());
  EXPECT_EQ((*store->Info(KeyOf(1)))->hits, 2u);
}

TEST_F(StoreTest, EvictsLeastRecentlyUsedDownToTheLowMark) {
  auto store = OpenFullStoreOfTen();
  ASSERT_NE(store, nullptr);
  // Touch the two oldest: they become the most recently used.
  ASSERT_TRUE(store->Get(KeyOf(0))->has_value());
  ASSERT_TRUE(store->Get(KeyOf(1))->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  // 11 000 bytes > 10 000: evict down to 5 000, least recently used first.
  ASSERT_TRUE(store->Put(KeyOf(10), Bytes(1000, 10), Info()).has_value());
  auto stats = store->Stats();
  EXPECT_LE(stats->bytes, 5000u);
  EXPECT_EQ(stats->evictions, 6u);
  for (int i : {0, 1, 8, 9, 10}) EXPECT_TRUE(*store->Contains(KeyOf(i))) << i;
  for (int i = 2; i <= 7; ++i) EXPECT_FALSE(*store->Contains(KeyOf(i))) << i;
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("evicted 6")));
}

TEST_F(StoreTest, TouchCountsAsAReadForEvictionAndReturnsTheChecksum) {
  auto store = OpenFullStoreOfTen();
  ASSERT_NE(store, nullptr);
  const uint64_t hits_before = store->Stats()->hits;
  for (int i : {0, 1}) {
    auto touched = store->Touch(KeyOf(i));
    ASSERT_THAT(touched, IsOk());
    ASSERT_TRUE(touched->has_value()) << i;
    EXPECT_EQ(**touched, HashBytes(Bytes(1000, i))) << i;
  }
  EXPECT_EQ(store->Stats()->hits, hits_before + 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  // As after reads: the two touched are the most recently used, and survive the eviction.
  ASSERT_TRUE(store->Put(KeyOf(10), Bytes(1000, 10), Info()).has_value());
  for (int i : {0, 1, 8, 9, 10}) EXPECT_TRUE(*store->Contains(KeyOf(i))) << i;
  for (int i = 2; i <= 7; ++i) EXPECT_FALSE(*store->Contains(KeyOf(i))) << i;
  auto gone = store->Touch(KeyOf(2));
  ASSERT_THAT(gone, IsOk());
  EXPECT_FALSE(gone->has_value());
  EXPECT_THAT(store->Touch("v1-not-a-key"), StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(StoreTest, ArtifactLargerThanTheCapIsRefused) {
  StoreOptions o = Options();
  o.max_bytes = 1000;
  auto store = OpenStore(o);
  EXPECT_THAT(store->Put(KeyOf(1), Bytes(1001, 1), Info()).error(),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("larger than the store's cap")));
  EXPECT_EQ(store->Stats()->entries, 0u);
}

TEST_F(StoreTest, ReadOnlyRefusesWritesButReadsAndVerifies) {
  { ASSERT_TRUE(OpenStore()->Put(KeyOf(1), "bytes", Info()).has_value()); }
  StoreOptions o = Options();
  o.read_only = true;
  auto store = OpenStore(o);
  EXPECT_EQ(**store->Get(KeyOf(1)), "bytes");
  EXPECT_THAT(store->Put(KeyOf(2), "x", Info()).error(),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("read-only")));
  EXPECT_THAT(store->StartPut(KeyOf(2), Info()).error(), StatusIs(StatusCode::kPermissionDenied));
  EXPECT_THAT(store->Erase(KeyOf(1)).error(), StatusIs(StatusCode::kPermissionDenied));
  EXPECT_THAT(store->EvictTo(0).error(), StatusIs(StatusCode::kPermissionDenied));
  EXPECT_THAT(store->Compact(), StatusIs(StatusCode::kPermissionDenied));
  EXPECT_TRUE(store->VerifyAll()->corrupt.empty());
}

uint64_t DirectoryBytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

TEST_F(StoreTest, CompactKeepsEveryEntryAndReclaimsErasedSpace) {
  auto store = OpenStore();
  // Chunked (64 KiB chunks here) and inline entries; then three in four are erased.
  constexpr int kEntries = 48;
  auto size_of = [](int i) { return i % 2 == 0 ? size_t{300} << 10 : size_t{5000}; };
  for (int i = 0; i < kEntries; ++i) {
    ASSERT_TRUE(store->Put(KeyOf(i), Bytes(size_of(i), i), Info()).has_value());
  }
  const uint64_t before = DirectoryBytes(dir_ / "blobs") + DirectoryBytes(dir_ / "large");
  for (int i = 0; i < kEntries; ++i) {
    if (i % 4 != 0) {
      ASSERT_TRUE(*store->Erase(KeyOf(i)));
    }
  }
  // A chunked entry's blob file goes with its erase; the rest is LevelDB's to reclaim.
  int live_chunked = 0;
  for (int i = 0; i < kEntries; i += 4) live_chunked += size_of(i) > (64u << 10);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "large"), fs::directory_iterator()),
            live_chunked)
      << "one blob file per live chunked entry";
  ASSERT_THAT(store->Compact(), IsOk());
  const uint64_t after = DirectoryBytes(dir_ / "blobs") + DirectoryBytes(dir_ / "large");
  uint64_t live = 0;
  for (int i = 0; i < kEntries; i += 4) live += size_of(i);
  // What is left is what is live, give or take LevelDB's own files.
  EXPECT_LT(after, live + live / 10 + (256 << 10)) << "before " << before << ", after " << after;
  for (int i = 0; i < kEntries; ++i) {
    auto got = store->Get(KeyOf(i));
    ASSERT_TRUE(got.has_value()) << got.error().ToString();
    if (i % 4 != 0) {
      EXPECT_FALSE(got->has_value()) << i;
      continue;
    }
    ASSERT_TRUE(got->has_value()) << i;
    EXPECT_EQ(**got, Bytes(size_of(i), i)) << i;
    auto reader = store->OpenReader(KeyOf(i));
    ASSERT_TRUE(reader.has_value() && *reader != nullptr);
    EXPECT_EQ(ReadAll(**reader), Bytes(size_of(i), i)) << i;
  }
  EXPECT_TRUE(store->VerifyAll()->corrupt.empty());
}

TEST_F(StoreTest, ReadOnlyOpenOfAMissingStoreFails) {
  StoreOptions o = Options();
  o.read_only = true;
  auto store = Store::Open(dir_, o);
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error(), StatusIs(StatusCode::kNotFound, HasSubstr("no store at")));
  EXPECT_FALSE(fs::exists(dir_)) << "read-only open must not create anything";
}

TEST_F(StoreTest, SecondOpenInTheSameProcessIsRefused) {
  auto store = OpenStore();
  auto again = Store::Open(dir_, Options());
  ASSERT_FALSE(again.has_value());
  EXPECT_THAT(again.error(), StatusIs(StatusCode::kUnavailable, HasSubstr("already open")));
}

TEST_F(StoreTest, LockedByAnotherProcessNamesIt) {
  { OpenStore(); }  // Create it.
  ASSERT_THAT(WriteServerInfo(dir_, ServerInfo{0, "127.0.0.1:7070", "now"}), IsOk());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StoreOptions o;
    o.min_free_bytes = 0;
    auto store = Store::Open(dir_, o);
    const char c = store.has_value() ? 'y' : 'n';
    [[maybe_unused]] ssize_t n = write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  // The server.json names the holder's pid: rewrite it with the child's.
  ASSERT_THAT(WriteServerInfo(dir_, ServerInfo{child, "127.0.0.1:7070", "now"}), IsOk());
  auto store = Store::Open(dir_, Options());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error(), StatusIs(StatusCode::kUnavailable,
                                      HasSubstr("in use by process " + std::to_string(child))));
  EXPECT_THAT(store.error().message(), HasSubstr("127.0.0.1:7070"));
  // The kernel dropped the dead child's lock.
  EXPECT_TRUE(Store::Open(dir_, Options()).has_value());
}

TEST_F(StoreTest, PermissionDeniedIsReported) {
  { OpenStore(); }
  // Root ignores file modes: check as an unprivileged user in a child process.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (getuid() == 0 && setuid(65534) != 0) _exit(3);
    auto store = Store::Open(dir_, StoreOptions{});
    if (store.has_value()) _exit(1);
    if (store.error().code() != StatusCode::kPermissionDenied) _exit(2);
    if (store.error().message().find("Permission denied") == std::string::npos) _exit(4);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: opened, 2: wrong code, 3: setuid failed, 4: message";
}

TEST_F(StoreTest, CatalogFromANewerVersionIsRefused) {
  { OpenStore(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "catalog.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(dir_, Options());
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error(), StatusIs(StatusCode::kFailedPrecondition,
                                      HasSubstr("schema version 99, newer than")));
}

TEST_F(StoreTest, UnreadableCatalogIsReported) {
  { OpenStore(); }
  fs::remove(dir_ / "catalog.sqlite-wal");
  fs::remove(dir_ / "catalog.sqlite-shm");
  std::ofstream(dir_ / "catalog.sqlite", std::ios::trunc) << std::string(4096, 'x');
  auto store = Store::Open(dir_, Options());
  ASSERT_FALSE(store.has_value());
  EXPECT_THAT(store.error(), StatusIs(StatusCode::kDataLoss, HasSubstr("catalog.sqlite")));
}

TEST_F(StoreTest, OlderCatalogIsMigratedAtOpen) {
  fs::create_directories(dir_);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "catalog.sqlite").c_str(), &db), SQLITE_OK);
  // Schema version 1 as the first migration left it, with no counters table yet.
  const char* v1 =
      "CREATE TABLE entries (key TEXT PRIMARY KEY NOT NULL, size INTEGER NOT NULL, checksum TEXT "
      "NOT NULL, target TEXT NOT NULL, compiler_id TEXT NOT NULL, graph_name TEXT NOT NULL "
      "DEFAULT '', compile_seconds REAL NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL, "
      "last_access_ms INTEGER NOT NULL, hits INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
      "PRAGMA user_version = 1;";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Put(KeyOf(1), "x", Info()).has_value());
  ASSERT_THAT(store->Flush(), IsOk());  // Writes the counters table migration 2 created.
  store.reset();
  ASSERT_EQ(sqlite3_open((dir_ / "catalog.sqlite").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_GE(sqlite3_column_int(stmt, 0), 2);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(StoreTest, ReconcileRebuildsLostCatalogRowsAndDropsRowsWithoutBytes) {
  {
    auto store = OpenStore();
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(store->Put(KeyOf(i), Bytes(100 + i, i), Info(std::to_string(i))).has_value());
  }
  // Lose two rows, and add one for bytes that never existed; then make the close look unclean
  // so open does a full reconciliation (as after a crash).
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "catalog.sqlite").c_str(), &db), SQLITE_OK);
  const std::string sql = "DELETE FROM entries WHERE key IN ('" + KeyOf(1) + "','" + KeyOf(3) +
                          "'); INSERT INTO entries VALUES ('" + KeyOf(9) +
                          "', 5, '00', 't', 'c', '', 0, 1, 1, 0);";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  {
    // Opening LevelDB directly would need its own dependency; a crash is simpler: a child opens
    // the store and is killed, so no clean-close marker is written.
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      StoreOptions o;
      o.min_free_bytes = 0;
      o.log = [](std::string_view) {};
      auto s = Store::Open(dir_, o);
      raise(SIGKILL);
    }
    waitpid(child, nullptr, 0);
  }
  auto store = OpenStore();
  EXPECT_EQ(store->Stats()->entries, 5u);
  EXPECT_TRUE(store->Info(KeyOf(1))->has_value());
  EXPECT_EQ((*store->Info(KeyOf(3)))->artifact.graph_name, "3");
  EXPECT_FALSE(store->Info(KeyOf(9))->has_value());
  EXPECT_THAT(log_, ::testing::Contains(HasSubstr("2 entries re-catalogued, 1 catalog rows")));
}

// ---- Blob files: the bytes of chunked artifacts, one file each in DIR/large ----

std::vector<fs::path> BlobFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "large")) files.push_back(e.path());
  return files;
}

TEST_F(StoreTest, AChunkedArtifactIsOneBlobFileThatItsEraseRemoves) {
  auto store = OpenStore();
  const std::string bytes = Bytes((64 << 10) * 5 + 7, 1);
  ASSERT_THAT(store->Put(KeyOf(1), bytes, Info()), IsOk());
  ASSERT_THAT(store->Put(KeyOf(2), Bytes(100, 2), Info()), IsOk());  // Inline: no file.
  const auto files = BlobFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_THAT(files[0].filename().string(), ::testing::StartsWith(KeyOf(1) + "."));
  EXPECT_EQ(fs::file_size(files[0]), bytes.size());
  // A reader opened before the erase reads the whole artifact after it.
  auto reader = store->OpenReader(KeyOf(1));
  ASSERT_TRUE(reader.has_value() && *reader != nullptr);
  ASSERT_THAT(store->Erase(KeyOf(1)), IsOk());
  EXPECT_TRUE(BlobFiles(dir_).empty()) << "the erase left the blob file behind";
  EXPECT_EQ(ReadAll(**reader), bytes);
  auto got = store->Get(KeyOf(1));
  ASSERT_THAT(got, IsOk());
  EXPECT_FALSE(got->has_value());
}

// Stores written before blob files keep a chunked artifact's chunks in LevelDB records (entry
// format 1), the one layout whose reader reads from a snapshot: whole, streamed, and by a
// reader opened before an erase.
TEST_F(StoreTest, AFormatOneChunkedEntryIsReadWholeEvenByAReaderOpenedBeforeItsErase) {
  const uint32_t chunk_bytes = Options().chunk_bytes;
  const std::string bytes = Bytes(chunk_bytes * 2 + 123, 4);
  {
    auto store = OpenStore();
    ASSERT_THAT(store->Put(KeyOf(1), Bytes(100, 1), Info()), IsOk());
  }
  {
    // Written as such a store wrote it: chunks, the entry record naming them, the index record.
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), (dir_ / "blobs").string(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    const XXH128_hash_t sum = XXH3_128bits(bytes.data(), bytes.size());
    blob::EntryLayout layout;
    layout.size = bytes.size();
    layout.generation = 77;
    layout.checksum = Hash128{sum.high64, sum.low64};
    layout.chunk_bytes = chunk_bytes;
    layout.chunk_count = 3;
    leveldb::WriteBatch batch;
    std::vector<uint64_t> hashes;
    for (uint32_t i = 0; i < layout.chunk_count; ++i) {
      const std::string chunk = bytes.substr(size_t{i} * chunk_bytes, chunk_bytes);
      hashes.push_back(XXH3_64bits(chunk.data(), chunk.size()));
      batch.Put(blob::ChunkKey(KeyOf(2), layout.generation, i), chunk);
    }
    std::string record;
    blob::AppendEntryTrailer(layout, hashes, record);
    batch.Put(blob::EntryKey(KeyOf(2)), record);
    batch.Put(blob::IndexKey(KeyOf(2)), blob::EncodeIndexRecord({.size = layout.size,
                                                                 .generation = layout.generation,
                                                                 .checksum = layout.checksum,
                                                                 .created_ms = 1,
                                                                 .artifact = Info()}));
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
  }
  auto store = OpenStore();
  auto whole = store->Get(KeyOf(2));
  ASSERT_THAT(whole, IsOk());
  ASSERT_TRUE(whole->has_value()) << "the format-1 entry was not read";
  EXPECT_EQ(**whole, bytes);
  auto reader = store->OpenReader(KeyOf(2));
  ASSERT_THAT(reader, IsOk());
  ASSERT_NE(*reader, nullptr);
  ASSERT_THAT(store->Erase(KeyOf(2)), IsOk());
  EXPECT_EQ(ReadAll(**reader), bytes) << "the erase took chunks from a reader opened before it";
  auto gone = store->Get(KeyOf(2));
  ASSERT_THAT(gone, IsOk());
  EXPECT_FALSE(gone->has_value());
  auto after = store->OpenReader(KeyOf(2));
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(*after, nullptr);
}

TEST_F(StoreTest, BlobFilesNoRecordNamesAreRemovedAtOpenAndOthersLeftAlone) {
  {
    auto store = OpenStore();
    ASSERT_THAT(store->Put(KeyOf(1), Bytes(200 << 10, 1), Info()), IsOk());
  }
  // What a put cut short by a crash leaves: a file under a name the store makes, no record.
  const fs::path orphan = dir_ / "large" / (KeyOf(9) + ".00000000000000ab");
  const fs::path stale = dir_ / "large" / (KeyOf(1) + ".00000000000000ab");  // Old generation.
  const fs::path foreign = dir_ / "large" / "README";
  for (const fs::path& p : {orphan, stale, foreign}) std::ofstream(p) << "partial";
  auto store = OpenStore();
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(foreign)) << "a file the store did not name was removed";
  EXPECT_EQ(BlobFiles(dir_).size(), 2u);  // KeyOf(1)'s live file and README.
  auto got = store->Get(KeyOf(1));
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, Bytes(200 << 10, 1));
}

TEST_F(StoreTest, AMissingOrShortBlobFileIsAQuarantinedMissNeverBadBytes) {
  {
    auto store = OpenStore();
    ASSERT_THAT(store->Put(KeyOf(1), Bytes(300 << 10, 1), Info()), IsOk());
    ASSERT_THAT(store->Put(KeyOf(2), Bytes(300 << 10, 2), Info()), IsOk());
  }
  for (const fs::path& file : BlobFiles(dir_)) {
    if (file.filename().string().starts_with(KeyOf(1))) {
      fs::remove(file);
    } else {
      fs::resize_file(file, (300 << 10) - 1);
    }
  }
  auto store = OpenStore();
  auto missing = store->Get(KeyOf(1));
  ASSERT_THAT(missing, IsOk());
  EXPECT_FALSE(missing->has_value());
  auto short_reader = store->OpenReader(KeyOf(2));
  ASSERT_THAT(short_reader, IsOk());
  EXPECT_EQ(*short_reader, nullptr);
  auto stats = store->Stats();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->quarantined, 2u);
  EXPECT_EQ(stats->entries, 0u);
  EXPECT_FALSE(*store->Contains(KeyOf(1)));
  EXPECT_FALSE(*store->Contains(KeyOf(2)));
}

TEST_F(StoreTest, VerifyAllSweepsOrphanBlobFilesButNotAPutInProgress) {
  auto store = OpenStore();
  auto writer = store->StartPut(KeyOf(1), Info());
  ASSERT_THAT(writer, IsOk());
  ASSERT_THAT((*writer)->Append(Bytes(200 << 10, 1)), IsOk());  // Three chunks on disk.
  ASSERT_EQ(BlobFiles(dir_).size(), 1u);
  const fs::path orphan = dir_ / "large" / (KeyOf(9) + ".00000000000000ab");
  std::ofstream(orphan) << "partial";
  auto report = store->VerifyAll();
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->orphan_chunks_removed, 1u);
  EXPECT_FALSE(fs::exists(orphan));
  ASSERT_EQ(BlobFiles(dir_).size(), 1u) << "VerifyAll removed the file of a put in progress";
  auto outcome = (*writer)->Commit();
  ASSERT_THAT(outcome, IsOk());
  auto got = store->Get(KeyOf(1));
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, Bytes(200 << 10, 1));
}

TEST_F(StoreTest, AnAbandonedOrDuplicatePutLeavesNoBlobFile) {
  auto store = OpenStore();
  {
    auto writer = store->StartPut(KeyOf(1), Info());
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT((*writer)->Append(Bytes(200 << 10, 1)), IsOk());
    EXPECT_EQ(BlobFiles(dir_).size(), 1u);
  }  // Destroyed without a commit.
  EXPECT_TRUE(BlobFiles(dir_).empty());
  ASSERT_THAT(store->Put(KeyOf(1), Bytes(200 << 10, 1), Info()), IsOk());
  auto again = store->Put(KeyOf(1), Bytes(200 << 10, 1), Info());
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(*again, PutOutcome::kAlreadyPresent);
  EXPECT_EQ(BlobFiles(dir_).size(), 1u) << "the second put's file was kept";
}

}  // namespace
}  // namespace hlocache::cache
