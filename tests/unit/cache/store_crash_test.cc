// Crash consistency and corruption handling of cache::Store, against real processes and real
// bytes on disk:
//   - StoreCrashTest.SigkillAtRandomInstants: a child (store_crash_child.cc) puts artifacts
//     forever and is killed with SIGKILL at a random instant, round after round on one directory;
//     after each round the parent reopens the store and checks that every acknowledged put is
//     there, byte-exact, and that nothing ever reads back wrong.
//   - StoreCorruptionTest.*: bytes are flipped inside the store's LevelDB records (found by
//     markers in the artifact content, never by the private record format); reads must miss or
//     fail with kDataLoss, never hand out the bad bytes, and the entry must be quarantined.
//
// Environment knobs (for reproducing a failure): HLOCACHE_CRASH_SEED, HLOCACHE_CRASH_ROUNDS,
// HLOCACHE_CRASH_KEEP=1 (keep the temporary directory).
#define HLOCACHE_CRASH_CHILD_NO_MAIN
#include "tests/unit/cache/store_crash_child.cc"  // The artifact generator the child uses.
#undef HLOCACHE_CRASH_CHILD_NO_MAIN

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/store.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_STORE_CRASH_CHILD
#error "HLOCACHE_STORE_CRASH_CHILD must name the store_crash_child executable"
#endif

extern char** environ;

namespace hlocache::cache {
namespace {

namespace fs = std::filesystem;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::strtoull(v, nullptr, 0) : fallback;
}

// A fresh directory under the test temp dir; removed at the end unless the test failed or
// HLOCACHE_CRASH_KEEP is set.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    std::string tmpl = (fs::path(::testing::TempDir()) / ("hlocache-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
    }
    path_ = tmpl;
  }
  ~ScratchDir() {
    if (::testing::Test::HasFailure() || EnvOr("HLOCACHE_CRASH_KEEP", 0) != 0) {
      std::printf("kept %s for inspection\n", path_.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::vector<std::string> ReadCompleteLines(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(all.substr(start, nl - start));
  }
  return lines;  // A torn last line (no newline) is left out.
}

// What the child's logs say, over every round so far.
struct ChildLogs {
  size_t opened = 0;
  std::set<std::string> put_attempted;    // "put KEY" in attempts.log.
  std::set<std::string> erase_attempted;  // "erase KEY" in attempts.log.
  std::set<std::string> committed;        // A put of KEY returned OK.
  std::set<std::string> erased;           // An erase of KEY returned OK.
  size_t unknown_lines = 0;
};

ChildLogs ReadChildLogs(const fs::path& base) {
  ChildLogs logs;
  for (const std::string& line : ReadCompleteLines(base / "attempts.log")) {
    if (line.rfind("opened ", 0) == 0) {
      ++logs.opened;
    } else if (line.rfind("put ", 0) == 0) {
      logs.put_attempted.insert(line.substr(4));
    } else if (line.rfind("erase ", 0) == 0) {
      logs.erase_attempted.insert(line.substr(6));
    } else {
      ++logs.unknown_lines;
    }
  }
  for (const std::string& line : ReadCompleteLines(base / "committed.log")) {
    if (line.rfind("erased ", 0) == 0) {
      logs.erased.insert(line.substr(7));
    } else if (crash_artifact::Decode(line)) {
      logs.committed.insert(line);
    } else {
      ++logs.unknown_lines;
    }
  }
  return logs;
}

StoreOptions ParentOptions() {
  StoreOptions o = crash_artifact::ChildStoreOptions();
  o.log = [](std::string_view line) {
    std::fprintf(stderr, "[store] %.*s\n", static_cast<int>(line.size()), line.data());
  };
  return o;
}

// A streamed read through OpenReader, every chunk compared with the expected bytes as it arrives.
struct StreamOutcome {
  bool open_failed = false;  // OpenReader itself returned an error (in `error`).
  bool miss = false;         // OpenReader returned nullptr.
  bool complete = false;     // Next() returned the empty span at the end.
  Status error;              // The error of OpenReader or Next().
  size_t chunks = 0;
  size_t bytes_ok = 0;   // Bytes handed out, all equal to the expected ones.
  std::string mismatch;  // Non-empty: a chunk that differs from the expected bytes was handed out.
};

StreamOutcome StreamAndCompare(Store& store, const std::string& key, const std::string& expected) {
  StreamOutcome out;
  auto reader = store.OpenReader(key);
  if (!reader) {
    out.open_failed = true;
    out.error = reader.error();
    return out;
  }
  if (*reader == nullptr) {
    out.miss = true;
    return out;
  }
  if ((*reader)->info().size != expected.size()) {
    out.mismatch = "reader info().size " + std::to_string((*reader)->info().size) +
                   " != " + std::to_string(expected.size());
    return out;
  }
  for (;;) {
    auto chunk = (*reader)->Next();
    if (!chunk) {
      out.error = chunk.error();
      return out;
    }
    if (chunk->empty()) {
      out.complete = true;
      if (out.bytes_ok != expected.size()) {
        out.mismatch = "stream ended after " + std::to_string(out.bytes_ok) + " of " +
                       std::to_string(expected.size()) + " bytes";
      }
      return out;
    }
    ++out.chunks;
    const std::string_view got(chunk->data(), chunk->size());
    if (out.bytes_ok + got.size() > expected.size()) {
      out.mismatch = "stream hands out more than " + std::to_string(expected.size()) + " bytes";
      return out;
    }
    const std::string_view want = std::string_view(expected).substr(out.bytes_ok, got.size());
    if (got != want) {
      size_t at = 0;
      while (got[at] == want[at]) ++at;
      out.mismatch = "chunk " + std::to_string(out.chunks) + " differs at artifact offset " +
                     std::to_string(out.bytes_ok + at);
      return out;
    }
    out.bytes_ok += got.size();
  }
}

std::string Describe(const StreamOutcome& s) {
  std::string d = s.open_failed ? "OpenReader failed: " + s.error.ToString()
                  : s.miss      ? "miss"
                  : s.complete  ? "complete"
                                : "Next failed: " + s.error.ToString();
  d += " after " + std::to_string(s.chunks) + " chunks / " + std::to_string(s.bytes_ok) + " bytes";
  if (!s.mismatch.empty()) d += "; MISMATCH: " + s.mismatch;
  return d;
}

// ---------------------------------------------------------------------------------------------
// Crash rounds.

struct RoundCounts {
  size_t listed = 0;
  size_t present = 0;
  size_t must_be_present = 0;
  uint64_t bytes = 0;
  size_t chunked_present = 0;
};

// Reopens the store after a kill and checks everything; failures name the round and the seed.
void CheckAfterCrash(const fs::path& dir, const ChildLogs& logs, RoundCounts& counts) {
  auto opened = Store::Open(dir, ParentOptions());
  ASSERT_THAT(opened, IsOk()) << "reopening after SIGKILL";
  Store& store = **opened;

  auto listed = store.List(ListFilter{});
  ASSERT_THAT(listed, IsOk());
  counts.listed = listed->size();
  std::set<std::string> listed_keys;
  uint64_t listed_bytes = 0;
  for (const EntryInfo& e : *listed) {
    EXPECT_TRUE(listed_keys.insert(e.key).second) << "List returns " << e.key << " twice";
    const auto spec = crash_artifact::Decode(e.key);
    ASSERT_TRUE(spec.has_value()) << "List returns a key the child never made: " << e.key;
    EXPECT_TRUE(logs.put_attempted.contains(e.key))
        << e.key << " is listed but the child never started putting it";
    EXPECT_EQ(e.size, spec->size) << "catalog size of " << e.key;
    listed_bytes += e.size;
  }

  // Every key ever attempted, plus every listed one.
  std::set<std::string> keys = logs.put_attempted;
  keys.insert(listed_keys.begin(), listed_keys.end());
  for (const std::string& key : keys) {
    const auto spec = crash_artifact::Decode(key);
    ASSERT_TRUE(spec.has_value()) << key;
    const bool must_be_present =
        logs.committed.contains(key) && !logs.erase_attempted.contains(key);
    const bool must_be_absent = logs.erased.contains(key);
    counts.must_be_present += must_be_present;

    auto contains = store.Contains(key);
    ASSERT_THAT(contains, IsOk()) << key;
    auto got = store.Get(key);
    ASSERT_THAT(got, IsOk()) << "Get(" << key << ")";
    // The expected bytes, made only for keys that are there (most attempted keys are long gone).
    const std::string expected = got->has_value() ? crash_artifact::Content(*spec) : std::string();
    if (got->has_value()) {
      // (c) Never wrong bytes.
      ASSERT_EQ(got->value().size(), expected.size()) << "Get(" << key << ") returns wrong size";
      ASSERT_TRUE(got->value() == expected) << "Get(" << key << ") returns wrong bytes";
    }
    // (b) Acknowledged puts survive.
    if (must_be_present) {
      EXPECT_TRUE(*contains) << key << " was acknowledged (committed.log) but is not present";
      EXPECT_TRUE(got->has_value()) << key << " was acknowledged (committed.log) but Get misses";
    }
    if (must_be_absent) {
      EXPECT_FALSE(*contains) << key << " was erased (Erase returned) but is present again";
      EXPECT_FALSE(got->has_value()) << key << " was erased (Erase returned) but Get finds it";
    }
    EXPECT_EQ(*contains, listed_keys.contains(key))
        << key << ": Contains and List disagree (Contains=" << *contains << ")";
    EXPECT_EQ(*contains, got->has_value()) << key << ": Contains=" << *contains << " but Get "
                                           << (got->has_value() ? "hits" : "misses");
    if (!got->has_value()) continue;

    // (a) Present keys read back exactly, streamed too.
    ++counts.present;
    counts.bytes += expected.size();
    counts.chunked_present += expected.size() > crash_artifact::kChunkBytes;
    const StreamOutcome s = StreamAndCompare(store, key, expected);
    EXPECT_TRUE(s.complete && s.mismatch.empty())
        << "OpenReader(" << key << ", " << expected.size() << " bytes): " << Describe(s);
    auto info = store.Info(key);
    ASSERT_THAT(info, IsOk());
    ASSERT_TRUE(info->has_value()) << "Info(" << key << ") misses on a present key";
    EXPECT_EQ((*info)->size, expected.size());
    EXPECT_EQ((*info)->checksum, HashBytes(expected)) << "catalog checksum of " << key;
  }

  auto stats = store.Stats();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->entries, listed->size()) << "Stats().entries vs List";
  EXPECT_EQ(stats->bytes, listed_bytes) << "Stats().bytes vs the sizes List reports";
  EXPECT_EQ(stats->quarantined, 0u) << "something was quarantined: a crash corrupted bytes";

  // (d) VerifyAll finds nothing: no corrupt entry, and Open already removed half-written puts.
  auto report = store.VerifyAll();
  ASSERT_THAT(report, IsOk());
  EXPECT_THAT(report->corrupt, IsEmpty());
  EXPECT_EQ(report->checked, listed->size());
  EXPECT_EQ(report->bytes, listed_bytes);
  EXPECT_EQ(report->orphan_chunks_removed, 0u)
      << "VerifyAll removed orphan chunks: Open did not reconcile a half-written put";
}

pid_t SpawnChild(const fs::path& dir, uint32_t seed) {
  const std::string exe = HLOCACHE_STORE_CRASH_CHILD;
  const std::string dir_arg = dir.string();
  const std::string seed_arg = std::to_string(seed);
  char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(dir_arg.c_str()),
                  const_cast<char*>(seed_arg.c_str()), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, environ);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn(" << exe << "): " << std::strerror(rc);
    return -1;
  }
  return pid;
}

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

TEST(StoreCrashTest, SigkillAtRandomInstants) {
  const uint64_t seed = EnvOr("HLOCACHE_CRASH_SEED", std::random_device{}());
  const int rounds = static_cast<int>(EnvOr("HLOCACHE_CRASH_ROUNDS", 24));
  std::printf("crash test: HLOCACHE_CRASH_SEED=%llu, %d rounds\n",
              static_cast<unsigned long long>(seed), rounds);
  ScratchDir scratch("crash");
  const fs::path base = scratch.path();
  const fs::path dir = base / "store";
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  size_t child_opened_rounds = 0;

  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("HLOCACHE_CRASH_SEED=" + std::to_string(seed) + ", round " +
                 std::to_string(round));
    const uint32_t child_seed = static_cast<uint32_t>(crash_artifact::Mix64(seed)) + round;
    // Half the rounds count the delay from the spawn (kills land in Open and its reconciliation
    // too), half from the moment the child has the store open (kills land in puts and erases).
    const bool after_open = rng() % 2 == 0;
    const int delay_ms = 20 + static_cast<int>(rng() % 281);
    const size_t opened_before = ReadChildLogs(base).opened;

    const auto round_start = std::chrono::steady_clock::now();
    const pid_t pid = SpawnChild(dir, child_seed);
    ASSERT_GT(pid, 0);
    int status = 0;
    bool exited_early = false;
    if (after_open) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (ReadChildLogs(base).opened == opened_before &&
             std::chrono::steady_clock::now() < deadline) {
        if (::waitpid(pid, &status, WNOHANG) == pid) {
          exited_early = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    if (!exited_early) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      exited_early = ::waitpid(pid, &status, WNOHANG) == pid;
    }
    if (exited_early) {
      FAIL() << "store_crash_child (seed " << child_seed
             << ") stopped by itself before the kill: " << DescribeWait(status)
             << " (its stderr says why)";
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0) << std::strerror(errno);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const auto child_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - round_start)
                              .count();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "store_crash_child " << DescribeWait(status);

    const ChildLogs logs = ReadChildLogs(base);
    child_opened_rounds += logs.opened > opened_before;
    RoundCounts counts;
    const auto check_start = std::chrono::steady_clock::now();
    CheckAfterCrash(dir, logs, counts);
    const auto check_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - check_start)
                              .count();
    std::printf(
        "round %2d: child seed %u, killed %4lld ms after spawn (%s, delay %3d ms); "
        "attempted %zu, committed %zu, erased %zu; present %zu (%zu chunked, %.1f MiB), "
        "must be present %zu, listed %zu; checked in %lld ms\n",
        round, child_seed, static_cast<long long>(child_ms),
        after_open ? "after open" : "from spawn", delay_ms, logs.put_attempted.size(),
        logs.committed.size(), logs.erased.size(), counts.present, counts.chunked_present,
        counts.bytes / 1048576.0, counts.must_be_present, counts.listed,
        static_cast<long long>(check_ms));
    std::fflush(stdout);
    if (::testing::Test::HasFailure()) {
      std::printf("stopping at the first failing round (%d); rerun with HLOCACHE_CRASH_SEED=%llu\n",
                  round, static_cast<unsigned long long>(seed));
      return;
    }
  }

  const ChildLogs logs = ReadChildLogs(base);
  size_t chunked_committed = 0;
  for (const std::string& key : logs.committed) {
    chunked_committed += crash_artifact::Decode(key)->size > crash_artifact::kChunkBytes;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "crash test: %d rounds in %.1f s; child opened the store in %zu rounds; "
      "%zu puts acknowledged (%zu chunked), %zu erases\n",
      rounds, secs, child_opened_rounds, logs.committed.size(), chunked_committed,
      logs.erased.size());
  EXPECT_EQ(logs.unknown_lines, 0u) << "malformed lines in the child's logs";
  // The test is only worth something if the child got work done between kills.
  EXPECT_GT(child_opened_rounds, 0u) << "the child never got the store open before the kill";
  EXPECT_GT(logs.committed.size(), 0u) << "the child never finished a put before the kill";
  EXPECT_GT(chunked_committed, 0u) << "the child never finished a chunked put before the kill";
}

// ---------------------------------------------------------------------------------------------
// Corruption planted where the store keeps bytes: LevelDB records (small artifacts) and blob
// files (chunked ones).

// One place holding artifact content: a LevelDB record (db_key) or a blob file (file), where a
// marker sits in it, and the artifact offset that marker names.
struct BlobHit {
  std::string db_key;
  fs::path file;
  size_t value_pos = 0;
  size_t artifact_offset = 0;
};

// The markers of our artifacts in `value`, from `from` on: (position, key, artifact offset).
void FindMarkers(std::string_view value, bool all,
                 const std::function<void(size_t, const std::string&, size_t)>& found) {
  size_t from = 0;
  while (true) {
    const size_t pos = value.find(crash_artifact::kMarkerPrefix, from);
    if (pos == std::string_view::npos || pos + crash_artifact::kMarkerLength > value.size()) return;
    from = pos + 1;
    const std::string_view marker = value.substr(pos, crash_artifact::kMarkerLength);
    const std::string key(marker.substr(crash_artifact::kMarkerPrefix.size(), 35));
    const size_t offset = std::strtoull(
        std::string(marker.substr(crash_artifact::kMarkerPrefix.size() + 37, 8)).c_str(), nullptr,
        16);
    if (crash_artifact::Marker(key, offset) != marker) continue;  // Not one of ours.
    found(pos, key, offset);
    if (!all) return;
  }
}

// Every record of DIR/blobs and every blob file of DIR/large that holds artifact content, by
// artifact key, ordered by offset.
std::map<std::string, std::vector<BlobHit>> ScanBlobs(const fs::path& dir) {
  std::map<std::string, std::vector<BlobHit>> hits;
  leveldb::DB* raw = nullptr;
  leveldb::Options options;
  options.create_if_missing = false;
  const leveldb::Status st = leveldb::DB::Open(options, (dir / "blobs").string(), &raw);
  EXPECT_TRUE(st.ok()) << "opening " << (dir / "blobs") << " with leveldb: " << st.ToString();
  if (!st.ok()) return hits;
  std::unique_ptr<leveldb::DB> db(raw);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view value(it->value().data(), it->value().size());
    FindMarkers(value, /*all=*/false, [&](size_t pos, const std::string& key, size_t offset) {
      hits[key].push_back(BlobHit{it->key().ToString(), {}, pos, offset});
    });
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(dir / "large", ec)) {
    std::ifstream in(file.path(), std::ios::binary);
    const std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    FindMarkers(value, /*all=*/true, [&](size_t pos, const std::string& key, size_t offset) {
      hits[key].push_back(BlobHit{{}, file.path(), pos, offset});
    });
  }
  for (auto& [key, list] : hits) {
    std::stable_sort(list.begin(), list.end(), [](const BlobHit& a, const BlobHit& b) {
      return a.artifact_offset < b.artifact_offset;
    });
  }
  return hits;
}

// Flips the first content byte after the marker of each record or file that holds the chunk
// starting at artifact offset `chunk_offset` (all copies, should the store keep more than one).
// Returns the artifact offset of the flipped byte.
size_t FlipByteInChunk(const fs::path& dir, const std::vector<BlobHit>& hits, size_t chunk_offset) {
  leveldb::DB* raw = nullptr;
  leveldb::Options options;
  options.create_if_missing = false;
  const leveldb::Status st = leveldb::DB::Open(options, (dir / "blobs").string(), &raw);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return 0;
  std::unique_ptr<leveldb::DB> db(raw);
  size_t flipped = 0;
  for (const BlobHit& hit : hits) {
    if (hit.artifact_offset != chunk_offset) continue;
    const size_t pos = hit.value_pos + crash_artifact::kMarkerLength;
    if (!hit.file.empty()) {
      std::fstream f(hit.file, std::ios::in | std::ios::out | std::ios::binary);
      char c = 0;
      f.seekg(static_cast<std::streamoff>(pos));
      EXPECT_TRUE(f.get(c)) << "no byte at " << pos << " of " << hit.file;
      f.seekp(static_cast<std::streamoff>(pos));
      f.put(static_cast<char>(c ^ 0x5a));
      EXPECT_TRUE(f.good()) << "cannot write " << hit.file;
      ++flipped;
      continue;
    }
    std::string value;
    const leveldb::Status got = db->Get(leveldb::ReadOptions(), hit.db_key, &value);
    EXPECT_TRUE(got.ok()) << got.ToString();
    EXPECT_LT(pos, value.size());
    if (!got.ok() || pos >= value.size()) continue;
    value[pos] = static_cast<char>(value[pos] ^ 0x5a);
    leveldb::WriteOptions sync;
    sync.sync = true;
    const leveldb::Status put = db->Put(sync, hit.db_key, value);
    EXPECT_TRUE(put.ok()) << put.ToString();
    ++flipped;
  }
  EXPECT_GT(flipped, 0u) << "no record or blob file holds the chunk at offset " << chunk_offset;
  return chunk_offset + crash_artifact::kMarkerLength;
}

// Distinct chunk offsets of one artifact's records, in order.
std::vector<size_t> ChunkOffsets(const std::vector<BlobHit>& hits) {
  std::vector<size_t> offsets;
  for (const BlobHit& h : hits) {
    if (offsets.empty() || offsets.back() != h.artifact_offset)
      offsets.push_back(h.artifact_offset);
  }
  return offsets;
}

struct Artifact {
  std::string key;
  std::string bytes;
};

class StoreCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path() / "store";
    // Small (one record each) and large (chunked) artifacts; the large ones put both ways.
    const uint32_t sizes[] = {1000,       9000,
                              40000,      crash_artifact::kChunkBytes,  // small
                              300u << 10, (200u << 10) + 1,
                              600u << 10, 400u << 10};
    for (uint32_t i = 0; i < 8; ++i) {
      const crash_artifact::Spec spec{0xc0ffee, i, sizes[i]};
      artifacts_.push_back(Artifact{crash_artifact::KeyOf(spec), crash_artifact::Content(spec)});
    }
    auto store = Store::Open(dir_, ParentOptions());
    ASSERT_THAT(store, IsOk());
    const ArtifactInfo info{"cpu-x86-64-v3", "corruption-test/1", "g", 0.5};
    for (size_t i = 0; i < artifacts_.size(); ++i) {
      const Artifact& a = artifacts_[i];
      if (i == 5 || i == 7) {
        auto writer = (*store)->StartPut(a.key, info);
        ASSERT_THAT(writer, IsOk());
        for (size_t at = 0; at < a.bytes.size(); at += 50000) {
          ASSERT_THAT((*writer)->Append(std::string_view(a.bytes).substr(at, 50000)), IsOk());
        }
        auto outcome = (*writer)->Commit();
        ASSERT_THAT(outcome, IsOk());
        EXPECT_EQ(*outcome, PutOutcome::kStored);
      } else {
        auto outcome = (*store)->Put(a.key, a.bytes, info);
        ASSERT_THAT(outcome, IsOk());
        EXPECT_EQ(*outcome, PutOutcome::kStored);
      }
    }
    for (const Artifact& a : artifacts_) ExpectExact(**store, a);
  }

  void ExpectExact(Store& store, const Artifact& a) {
    auto got = store.Get(a.key);
    ASSERT_THAT(got, IsOk());
    ASSERT_TRUE(got->has_value()) << a.key << " (" << a.bytes.size() << " bytes) misses";
    EXPECT_TRUE(got->value() == a.bytes) << a.key << " reads back wrong";
    const StreamOutcome s = StreamAndCompare(store, a.key, a.bytes);
    EXPECT_TRUE(s.complete && s.mismatch.empty()) << a.key << ": " << Describe(s);
  }

  // After a read that met corruption: the entry is gone, and stays a miss.
  void ExpectQuarantined(Store& store, const Artifact& a) {
    auto contains = store.Contains(a.key);
    ASSERT_THAT(contains, IsOk());
    EXPECT_FALSE(*contains) << a.key << " is still present after its corruption was found";
    auto info = store.Info(a.key);
    ASSERT_THAT(info, IsOk());
    EXPECT_FALSE(info->has_value()) << a.key << " still has a catalog row";
    auto again = store.Get(a.key);
    ASSERT_THAT(again, IsOk());
    EXPECT_FALSE(again->has_value()) << a.key << " hits after quarantine";
  }

  uint64_t Quarantined(Store& store) {
    auto stats = store.Stats();
    EXPECT_THAT(stats, IsOk());
    return stats ? stats->quarantined : 0;
  }

  ScratchDir scratch_{"corrupt"};
  fs::path dir_;
  std::vector<Artifact> artifacts_;
};

TEST_F(StoreCorruptionTest, ReadsNeverReturnFlippedBytes) {
  // The store is closed (SetUp's Store is gone): flip bytes in its LevelDB records.
  auto hits = ScanBlobs(dir_);
  for (const Artifact& a : artifacts_) {
    ASSERT_TRUE(hits.contains(a.key))
        << "no LevelDB record of " << dir_ / "blobs"
        << " and no blob file in " << dir_ / "large"
        << " holds the content of " << a.key
        << " (its markers are missing: are values compressed or encoded?)";
    if (a.bytes.size() > crash_artifact::kChunkBytes) {
      EXPECT_GE(ChunkOffsets(hits[a.key]).size(), 2u) << a.key << " is not chunked";
    }
  }
  const Artifact& small_get = artifacts_[0];
  const Artifact& small_stream = artifacts_[1];
  const Artifact& large_get_last = artifacts_[4];
  const Artifact& large_stream_first = artifacts_[5];
  const Artifact& large_stream_middle = artifacts_[6];
  const std::vector<size_t> last_offsets = ChunkOffsets(hits[large_get_last.key]);
  const std::vector<size_t> middle_offsets = ChunkOffsets(hits[large_stream_middle.key]);
  ASSERT_GE(middle_offsets.size(), 3u);
  FlipByteInChunk(dir_, hits[small_get.key], 0);
  FlipByteInChunk(dir_, hits[small_stream.key], 0);
  FlipByteInChunk(dir_, hits[large_get_last.key], last_offsets.back());
  FlipByteInChunk(dir_, hits[large_stream_first.key], 0);
  const size_t middle_bad = FlipByteInChunk(dir_, hits[large_stream_middle.key],
                                            middle_offsets[middle_offsets.size() / 2]);

  auto opened = Store::Open(dir_, ParentOptions());
  ASSERT_THAT(opened, IsOk());
  Store& store = **opened;
  const uint64_t q0 = Quarantined(store);
  EXPECT_EQ(q0, 0u);

  {  // A small artifact through Get: a miss, quarantined.
    auto got = store.Get(small_get.key);
    ASSERT_THAT(got, IsOk());
    EXPECT_FALSE(got->has_value()) << "Get returned the corrupt bytes of " << small_get.key;
    EXPECT_EQ(Quarantined(store), q0 + 1);
    ExpectQuarantined(store, small_get);
  }
  {  // A small artifact through OpenReader: a miss, or kDataLoss before any bad chunk.
    const StreamOutcome s = StreamAndCompare(store, small_stream.key, small_stream.bytes);
    EXPECT_TRUE(s.mismatch.empty()) << "corrupt bytes handed out: " << Describe(s);
    EXPECT_TRUE(s.miss || (!s.complete && s.error.code() == StatusCode::kDataLoss))
        << small_stream.key << ": " << Describe(s);
    EXPECT_EQ(Quarantined(store), q0 + 2);
    ExpectQuarantined(store, small_stream);
  }
  {  // A chunked artifact with its last chunk bad, through Get.
    auto got = store.Get(large_get_last.key);
    ASSERT_THAT(got, IsOk());
    EXPECT_FALSE(got->has_value()) << "Get returned the corrupt bytes of " << large_get_last.key;
    EXPECT_EQ(Quarantined(store), q0 + 3);
    ExpectQuarantined(store, large_get_last);
  }
  {  // A chunked artifact with its first chunk bad: nothing may be handed out.
    const StreamOutcome s =
        StreamAndCompare(store, large_stream_first.key, large_stream_first.bytes);
    EXPECT_TRUE(s.mismatch.empty()) << "corrupt bytes handed out: " << Describe(s);
    EXPECT_TRUE(s.miss || (!s.complete && s.error.code() == StatusCode::kDataLoss))
        << large_stream_first.key << ": " << Describe(s);
    EXPECT_LE(s.bytes_ok, crash_artifact::kMarkerLength);
    EXPECT_EQ(Quarantined(store), q0 + 4);
    ExpectQuarantined(store, large_stream_first);
  }
  {  // A chunked artifact with a middle chunk bad: good chunks, then kDataLoss mid-stream.
    const StreamOutcome s =
        StreamAndCompare(store, large_stream_middle.key, large_stream_middle.bytes);
    EXPECT_TRUE(s.mismatch.empty()) << "corrupt bytes handed out: " << Describe(s);
    EXPECT_TRUE(s.miss || (!s.complete && s.error.code() == StatusCode::kDataLoss))
        << large_stream_middle.key << ": " << Describe(s);
    EXPECT_LE(s.bytes_ok, middle_bad);
    std::printf("mid-stream corruption at offset %zu of %zu: %s\n", middle_bad,
                large_stream_middle.bytes.size(), Describe(s).c_str());
    EXPECT_EQ(Quarantined(store), q0 + 5);
    ExpectQuarantined(store, large_stream_middle);
  }

  // The intact ones are untouched.
  std::vector<std::string> intact_keys;
  for (size_t i : {2, 3, 7}) {
    ExpectExact(store, artifacts_[i]);
    intact_keys.push_back(artifacts_[i].key);
  }
  auto listed = store.List(ListFilter{});
  ASSERT_THAT(listed, IsOk());
  std::vector<std::string> listed_keys;
  for (const EntryInfo& e : *listed) listed_keys.push_back(e.key);
  EXPECT_THAT(listed_keys, UnorderedElementsAreArray(intact_keys));
  auto stats = store.Stats();
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->entries, 3u);
  EXPECT_EQ(stats->bytes,
            artifacts_[2].bytes.size() + artifacts_[3].bytes.size() + artifacts_[7].bytes.size());
  auto clean = store.VerifyAll();
  ASSERT_THAT(clean, IsOk());
  EXPECT_THAT(clean->corrupt, IsEmpty());
  EXPECT_EQ(clean->checked, 3u);
}

TEST_F(StoreCorruptionTest, VerifyAllFindsPlantedCorruption) {
  auto hits = ScanBlobs(dir_);
  const Artifact& small_bad = artifacts_[2];
  const Artifact& large_bad = artifacts_[7];  // Put through the streamed path.
  ASSERT_TRUE(hits.contains(small_bad.key) && hits.contains(large_bad.key))
      << "artifact content not found in " << dir_ / "blobs";
  const std::vector<size_t> offsets = ChunkOffsets(hits[large_bad.key]);
  ASSERT_GE(offsets.size(), 2u);
  FlipByteInChunk(dir_, hits[small_bad.key], 0);
  FlipByteInChunk(dir_, hits[large_bad.key], offsets[offsets.size() / 2]);

  {
    auto opened = Store::Open(dir_, ParentOptions());
    ASSERT_THAT(opened, IsOk());
    Store& store = **opened;
    const uint64_t q0 = Quarantined(store);
    auto report = store.VerifyAll();
    ASSERT_THAT(report, IsOk());
    EXPECT_EQ(report->checked, artifacts_.size());
    EXPECT_THAT(report->corrupt, UnorderedElementsAreArray({small_bad.key, large_bad.key}));
    EXPECT_EQ(Quarantined(store), q0 + 2);
    ExpectQuarantined(store, small_bad);
    ExpectQuarantined(store, large_bad);
    for (size_t i = 0; i < artifacts_.size(); ++i) {
      if (i != 2 && i != 7) ExpectExact(store, artifacts_[i]);
    }
    auto stats = store.Stats();
    ASSERT_THAT(stats, IsOk());
    EXPECT_EQ(stats->entries, artifacts_.size() - 2);
    auto again = store.VerifyAll();
    ASSERT_THAT(again, IsOk());
    EXPECT_THAT(again->corrupt, IsEmpty());
    EXPECT_EQ(again->checked, artifacts_.size() - 2);
  }

  // Quarantine removes the entry: its bytes are gone from LevelDB and its blob file, the
  // others' are all there.
  auto after = ScanBlobs(dir_);
  EXPECT_FALSE(after.contains(small_bad.key))
      << "records of quarantined " << small_bad.key << " are still in the store";
  EXPECT_FALSE(after.contains(large_bad.key))
      << "bytes of quarantined " << large_bad.key << " are still in the store";
  for (size_t i = 0; i < artifacts_.size(); ++i) {
    if (i != 2 && i != 7) {
      EXPECT_TRUE(after.contains(artifacts_[i].key)) << artifacts_[i].key;
    }
  }

  // And the quarantine survives a restart.
  auto reopened = Store::Open(dir_, ParentOptions());
  ASSERT_THAT(reopened, IsOk());
  EXPECT_EQ(Quarantined(**reopened), 2u);
  ExpectQuarantined(**reopened, small_bad);
  ExpectQuarantined(**reopened, large_bad);
}

}  // namespace
}  // namespace hlocache::cache
