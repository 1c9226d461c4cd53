// A bucket as a storage backend and as a client's tier (storage/s3_backend.h), on a real Ceph
// cluster: a monitor, two OSDs and a RADOS Gateway started for this run by
// tests/integration/ceph_cluster.sh, torn down at the end. One process runs every case, so the
// cluster starts once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "client/cache.h"
#include "storage/s3_backend.h"
#include "storage/s3_connection.h"
#include "tests/integration/server_harness.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif
#ifndef HLOCACHE_CEPH_SCRIPT
#error "HLOCACHE_CEPH_SCRIPT names tests/integration/ceph_cluster.sh"
#endif

namespace hlocache::testing {
namespace {

namespace fs = std::filesystem;
using storage::Backend;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kBucket = "s3://hlocache-test";

int Script(const std::string& args) {
  const std::string command = std::string("bash ") + HLOCACHE_CEPH_SCRIPT + " " + args;
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The cluster, for the whole run.
class Cluster : public ::testing::Environment {
 public:
  static inline fs::path dir;
  static inline std::string skip;  // Why the cases are skipped; empty when the cluster is up.
  static inline std::string endpoint;

  void SetUp() override {
    char tmpl[] = "/tmp/hlocache-ceph-XXXXXX";
    dir = ::mkdtemp(tmpl);
    const int rc = Script("start " + dir.string());
    if (rc == 77) {
      skip = "Ceph (ceph-mon, ceph-osd, radosgw) is not installed: make deps installs it";
      return;
    }
    ASSERT_EQ(rc, 0) << "the Ceph cluster did not start; its logs are in " << dir;
    std::ifstream env(dir / "env");
    for (std::string line; std::getline(env, line);) {
      const size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      ::setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);
      if (line.starts_with("AWS_ENDPOINT_URL_S3=")) endpoint = line.substr(eq + 1);
    }
  }
  void TearDown() override {
    if (!dir.empty()) {
      Script("stop " + dir.string());
      std::error_code ec;
      if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir, ec);
    }
  }
};

class S3BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Cluster::skip.empty()) GTEST_SKIP() << Cluster::skip;
  }
  static std::unique_ptr<Backend> Make(const std::string& url, storage::S3Options options = {}) {
    auto backend = storage::MakeS3Backend(url, options);
    EXPECT_THAT(backend, IsOk());
    return backend ? std::move(*backend) : nullptr;
  }
  // A request to the gateway as any S3 client would send it, bypassing the backend.
  static storage::S3Reply Raw(const std::string& method, const std::string& object,
                              std::string_view body = {}) {
    storage::S3ConnectionOptions o;
    o.credentials.access_key_id = std::getenv("AWS_ACCESS_KEY_ID");
    o.credentials.secret_access_key = std::getenv("AWS_SECRET_ACCESS_KEY");
    storage::S3Connection connection(o);
    storage::S3Request request;
    request.method = method;
    request.url = Cluster::endpoint + "/hlocache-test/" + object;
    request.body = body;
    auto reply = connection.Perform(request);
    EXPECT_THAT(reply, IsOk());
    return reply ? *reply : storage::S3Reply{};
  }
  // Where the backend keeps `key` under `prefix`.
  static std::string ObjectOf(const std::string& prefix, const std::string& key) {
    return prefix + "/" + key.substr(3, 2) + "/" + key;
  }
  static storage::ChunkSource Pieces(const std::string& bytes, size_t piece) {
    auto at = std::make_shared<size_t>(0);
    return [&bytes, piece, at]() -> Result<std::string_view> {
      std::string_view p = std::string_view(bytes).substr(*at, piece);
      *at += p.size();
      return p;
    };
  }
};

TEST_F(S3BackendTest, AnArtifactGoesUpOnceComesBackWholeAndIsReplacedWhenItDiffers) {
  auto backend = Make(std::string(kBucket) + "/once");
  const std::string key = TestKey(101);
  auto head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
  auto miss = backend->Get(key);
  ASSERT_THAT(miss, IsOk());
  EXPECT_FALSE(miss->has_value());

  const std::string artifact = MakeArtifact(key, 6 << 20, 1);
  ASSERT_THAT(backend->Write(key, artifact.size(), Pieces(artifact, 1 << 20), {}), IsOk());
  head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_EQ(head->value_or(0), artifact.size());
  auto got = backend->Get(key);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == artifact);

  // The same bytes again: the HEAD finds them, and nothing is uploaded (the object keeps its
  // time; the gateway's clock has one-second steps).
  const std::string first_time = Raw("HEAD", ObjectOf("once", key)).last_modified;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_THAT(backend->Put(key, artifact, {}), IsOk());
  EXPECT_EQ(Raw("HEAD", ObjectOf("once", key)).last_modified, first_time);

  // Other bytes of the same size (what a bad writer left): replaced.
  std::string other = artifact;
  other[other.size() / 2] ^= 1;
  EXPECT_EQ(Raw("PUT", ObjectOf("once", key), other).status, 200);
  ASSERT_THAT(backend->Put(key, artifact, {}), IsOk());
  got = backend->Get(key);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == artifact);
}

TEST_F(S3BackendTest, A300MiBArtifactGoesUpInPartsAndComesDownInRanges) {
  auto backend = Make(std::string(kBucket) + "/large");
  const std::string key = TestKey(102);
  const std::string artifact = MakeArtifact(key, size_t{300} << 20, 2);
  ASSERT_THAT(backend->Write(key, artifact.size(), Pieces(artifact, 3 << 20), {}), IsOk());
  // A multipart object's ETag names its part count ("...-19").
  EXPECT_THAT(Raw("HEAD", ObjectOf("large", key)).etag, HasSubstr("-"));
  size_t chunks = 0;
  std::string back;
  storage::ReadSink sink{[&](uint64_t size) {
                           back.reserve(size);
                           return size == artifact.size();
                         },
                         [&](std::string_view bytes) {
                           ++chunks;
                           back.append(bytes);
                           return true;
                         }};
  auto read = backend->Read(key, sink);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(*read);
  EXPECT_EQ(back.size(), artifact.size());
  EXPECT_TRUE(back == artifact);
}

TEST_F(S3BackendTest, AnUploadThatFailsHalfwayLeavesNothingVisible) {
  storage::S3Options options;
  options.multipart_threshold = 8 << 20;
  options.part_bytes = 5 << 20;
  auto backend = Make(std::string(kBucket) + "/broken", options);
  const std::string key = TestKey(103);
  const std::string artifact = MakeArtifact(key, 40 << 20, 3);
  size_t at = 0;
  storage::ChunkSource breaks = [&]() -> Result<std::string_view> {
    if (at >= artifact.size() / 2) return Error(IoError("the source broke"));
    std::string_view p = std::string_view(artifact).substr(at, 1 << 20);
    at += p.size();
    return p;
  };
  EXPECT_THAT(backend->Write(key, artifact.size(), breaks, {}), StatusIs(StatusCode::kIoError));
  auto head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
  // A source shorter than it said is refused too, and leaves nothing.
  const std::string shorter = artifact.substr(0, 20 << 20);
  EXPECT_THAT(backend->Write(key, artifact.size(), Pieces(shorter, 1 << 20), {}),
              StatusIs(StatusCode::kInvalidArgument));
  head = backend->Head(key);
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
}

TEST_F(S3BackendTest, WrongCredentialsAreOneClearErrorThatShowsNoSecret) {
  const std::string secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  const std::string wrong = "wrong-" + secret.substr(0, 8) + "-secret";
  ::setenv("AWS_SECRET_ACCESS_KEY", wrong.c_str(), 1);
  auto backend = Make(kBucket);
  ::setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  auto head = backend->Head(TestKey(104));
  ASSERT_THAT(head, StatusIs(StatusCode::kPermissionDenied, HasSubstr("SignatureDoesNotMatch")));
  EXPECT_THAT(head.error().message(), HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_THAT(head.error().message(), Not(HasSubstr(wrong)));
  EXPECT_THAT(head.error().message(), Not(HasSubstr(secret)));
  EXPECT_EQ(head.error().message().find('\n'), std::string::npos);
  auto bucket = Make("s3://no-such-bucket-here");
  EXPECT_THAT(bucket->Get(TestKey(104)), StatusIs(StatusCode::kFailedPrecondition));
}

// Writes and reads while one of the two OSDs is dead: the other holds every object (pools of
// size 2, min size 1), so no call fails and nothing is lost.
TEST_F(S3BackendTest, AKilledOsdLosesNoWriteAndNoRead) {
  auto backend = Make(std::string(kBucket) + "/osd");
  ASSERT_EQ(Script("kill-osd " + Cluster::dir.string() + " 1"), 0);
  std::vector<std::string> artifacts;
  for (uint64_t i = 0; i < 6; ++i) {
    artifacts.push_back(MakeArtifact(TestKey(200 + i), (1 + i) << 20, i));
    EXPECT_THAT(backend->Put(TestKey(200 + i), artifacts.back(), {}), IsOk()) << i;
  }
  for (uint64_t i = 0; i < 6; ++i) {
    auto got = backend->Get(TestKey(200 + i));
    ASSERT_THAT(got, IsOk()) << i;
    ASSERT_TRUE(got->has_value()) << i;
    EXPECT_TRUE(**got == artifacts[i]) << i;
  }
  ASSERT_EQ(Script("start-osd " + Cluster::dir.string() + " 1"), 0);
}

TEST_F(S3BackendTest, AStoppedGatewayIsUnavailableNotAHang) {
  storage::S3Options options;
  options.attempts = 2;
  auto backend = Make(kBucket, options);
  ASSERT_EQ(Script("stop-rgw " + Cluster::dir.string()), 0);
  EXPECT_THAT(backend->Head(TestKey(105)), StatusIs(StatusCode::kUnavailable));
  EXPECT_THAT(backend->Put(TestKey(105), MakeArtifact(TestKey(105), 1000, 5), {}),
              StatusIs(StatusCode::kUnavailable));
  ASSERT_EQ(Script("start-rgw " + Cluster::dir.string()), 0);
  auto head = backend->Head(TestKey(105));
  ASSERT_THAT(head, IsOk());
  EXPECT_FALSE(head->has_value());
}

std::string Module(int variant) {
  return "HloModule bucket" + std::to_string(variant) +
         "\nENTRY e {\n  a = f32[64] parameter(0)\n  c = f32[] constant(" +
         std::to_string(variant) +
         ")\n  d = f32[64] broadcast(c), dimensions={}\n  ROOT s = f32[64] multiply(a, d)\n}\n";
}

// Processes that share nothing but the bucket: the first compiles and uploads, the next gets
// it from the bucket; a corrupt object is dropped, compiled again and replaced.
TEST_F(S3BackendTest, ClientsShareExecutablesThroughTheBucketAndReplaceACorruptOne) {
  std::string log;
  client::CacheOptions options;
  options.worker_binary = HLOCACHE_BINARY;
  options.log = [&](std::string_view line) { log += std::string(line) + "\n"; };
  const std::string spec = std::string(kBucket) + "/clients";
  std::string key;
  {
    auto cache = client::Cache::Open(spec, options);
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(1));
    ASSERT_THAT(exe, IsOk()) << log;
    EXPECT_EQ(exe->source, client::Source::kCompiledHere);
    key = exe->key;
    (*cache)->Flush();
    EXPECT_EQ((*cache)->stats().uploads, 1u) << log;
  }
  {
    auto cache = client::Cache::Open(spec, options);
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(1));
    ASSERT_THAT(exe, IsOk()) << log;
    EXPECT_EQ(exe->source, client::Source::kRemote);
    EXPECT_EQ(exe->tier, spec);
    EXPECT_EQ((*cache)->stats().local_compiles, 0u);
  }
  EXPECT_EQ(Raw("PUT", ObjectOf("clients", key), "not an artifact").status, 200);
  {
    auto cache = client::Cache::Open(spec, options);
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(1));
    ASSERT_THAT(exe, IsOk()) << log;
    EXPECT_EQ(exe->source, client::Source::kCompiledHere);
    EXPECT_EQ((*cache)->stats().corrupt_dropped, 1u);
    (*cache)->Flush();
    EXPECT_EQ((*cache)->stats().uploads, 1u) << log;
  }
  {
    auto cache = client::Cache::Open(spec, options);
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(1));
    ASSERT_THAT(exe, IsOk()) << log;
    EXPECT_EQ(exe->source, client::Source::kRemote);
  }
}

// The command line names the endpoint with --s3-endpoint (here with no AWS_ENDPOINT_URL_S3 in
// the environment): one `hlocache run` compiles and uploads, the next runs what it uploaded.
TEST_F(S3BackendTest, CommandsShareThroughTheBucketWithTheEndpointOnTheCommandLine) {
  char tmpl[] = "/tmp/hlocache-s3-cli-XXXXXX";
  const fs::path root = ::mkdtemp(tmpl);
  std::ofstream(root / "m.hlo") << Module(9);
  const std::string command = "env -u AWS_ENDPOINT_URL_S3 -u AWS_ENDPOINT_URL " +
                              std::string(HLOCACHE_BINARY) + " run --s3-endpoint " +
                              Cluster::endpoint + " --cache " + kBucket + "/cli " +
                              (root / "m.hlo").string() + "; echo status=$?";
  const std::string first = CommandOutput(command);
  EXPECT_THAT(first, HasSubstr("from: compiled here"));
  EXPECT_THAT(first, HasSubstr("status=0"));
  const std::string second = CommandOutput(command);
  EXPECT_THAT(second, HasSubstr("from: remote (s3://hlocache-test/cli)"));
  EXPECT_THAT(second, HasSubstr("status=0"));
  EXPECT_THAT(first + second, Not(HasSubstr(std::getenv("AWS_SECRET_ACCESS_KEY"))));
  std::error_code ec;
  fs::remove_all(root, ec);
}

// Two hosts' servers on one bucket and no origin: the first compiles and uploads; the second
// fetches from the bucket, checked as an upload is, and compiles nothing.
TEST_F(S3BackendTest, HostServersShareCompilesThroughTheBucket) {
  char tmpl[] = "/tmp/hlocache-s3-hosts-XXXXXX";
  const fs::path root = ::mkdtemp(tmpl);
  const std::string upstream = std::string(kBucket) + "/hosts";
  auto start_host = [&](const char* name) {
    return std::make_unique<ServerProcess>(HLOCACHE_BINARY, root / name,
                                           std::vector<std::string>{"--upstream", upstream});
  };
  auto compile = [](ServerProcess& host) {
    auto r = host.Client()->Post("/v1/compile?target=cpu-x86-64-v2", Module(7), "text/plain");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer") << host.output();
    return r;
  };
  auto host_a = start_host("a");
  ASSERT_TRUE(host_a->started()) << host_a->output();
  auto first = compile(*host_a);
  ASSERT_TRUE(first && first->status == 200);
  EXPECT_EQ(first->get_header_value("X-Hlocache-Cache"), "miss");
  const std::string key = first->get_header_value("X-Hlocache-Key");
  // The upload is queued: wait until the bucket has it.
  auto bucket = Make(upstream);
  for (int i = 0; i < 200; ++i) {
    auto head = bucket->Head(key);
    if (head && head->has_value()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto head = bucket->Head(key);
  ASSERT_THAT(head, IsOk());
  ASSERT_TRUE(head->has_value()) << host_a->output();

  auto host_b = start_host("b");
  ASSERT_TRUE(host_b->started()) << host_b->output();
  auto again = compile(*host_b);
  ASSERT_TRUE(again && again->status == 200);
  EXPECT_EQ(again->get_header_value("X-Hlocache-Key"), key);
  // A miss on this host, a hit in the bucket.
  EXPECT_EQ(again->get_header_value("X-Hlocache-Cache"), "miss") << host_b->output();
  EXPECT_EQ(again->get_header_value("X-Hlocache-Origin"), "hit") << host_b->output();
  EXPECT_TRUE(again->body == first->body);
  auto stats = host_b->Client()->Get("/metrics");
  ASSERT_TRUE(stats);
  EXPECT_THAT(stats->body, HasSubstr("hlocache_upstream_fetches_total 1"));
  EXPECT_THAT(stats->body, HasSubstr("hlocache_compiles_total 0"));
  // The bucket's own requests: counted, with the bytes that came down (the artifact at least).
  EXPECT_THAT(stats->body, ::testing::ContainsRegex("hlocache_upstream_requests_total [1-9]"));
  EXPECT_THAT(stats->body,
              ::testing::ContainsRegex("hlocache_upstream_bytes_received_total [1-9][0-9]{2,}"));
  EXPECT_THAT(stats->body, HasSubstr("hlocache_upstream_request_errors_total{kind=\"denied\"} 0"));
  auto json = host_b->Client()->Get("/v1/stats");
  ASSERT_TRUE(json);
  EXPECT_THAT(json->body, HasSubstr("\"bytes_received\""));
  EXPECT_EQ(host_a->Stop(), 0);
  EXPECT_EQ(host_b->Stop(), 0);
  std::error_code ec;
  fs::remove_all(root, ec);
}

TEST_F(S3BackendTest, UsesAreMarkedAndGcEvictsTheLeastRecentlyUsedButNeverARecentOne) {
  const std::string url = std::string(kBucket) + "/gc";
  storage::S3Options options;
  options.list_page = 2;  // Every listing takes several pages.
  auto made = storage::MakeS3Backend(url, options);
  ASSERT_THAT(made, IsOk());
  std::unique_ptr<storage::Bucket> bucket = std::move(*made);
  const std::string a = TestKey(701), b = TestKey(702), c = TestKey(703);
  // Uploaded a, b, c, a second apart (the gateway's clock has one-second steps), then a used.
  for (const std::string& key : {a, b, c}) {
    ASSERT_THAT(bucket->Put(key, MakeArtifact(key, 100 << 10, 7), {}), IsOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  }
  bucket->NoteUse(a);
  bucket->FlushMarks();
  const std::string mark = "gc/access/" + a.substr(3, 2) + "/" + a;
  const std::string marked_at = Raw("HEAD", mark).last_modified;
  ASSERT_FALSE(marked_at.empty()) << "no use mark for a";
  // Something else under the prefix is not an artifact.
  EXPECT_EQ(Raw("PUT", "gc/notes.txt", "not hlocache's").status, 200);

  auto entries = bucket->ListEntries();
  ASSERT_THAT(entries, IsOk());
  ASSERT_EQ(entries->size(), 3u);
  std::map<std::string, storage::BucketEntry> by_key;
  for (const auto& e : *entries) by_key[e.key] = e;
  ASSERT_EQ(by_key.count(a) + by_key.count(b) + by_key.count(c), 3u);
  EXPECT_LT(by_key[b].last_use, by_key[c].last_use);
  EXPECT_LT(by_key[c].last_use, by_key[a].last_use) << "a's use mark is its last use";
  EXPECT_GT(by_key[a].size, uint64_t{100} << 10);

  // A second use within the hour writes no new mark.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  bucket->NoteUse(a);
  bucket->FlushMarks();
  EXPECT_EQ(Raw("HEAD", mark).last_modified, marked_at);

  const std::string gc = std::string(HLOCACHE_BINARY) + " gc --cache " + url + " --max-size 150K";
  // Everything was used within the default window (two hours): nothing goes.
  EXPECT_THAT(CommandOutput(gc + " 2>&1; echo status=$?"),
              ::testing::AllOf(HasSubstr("evicted 0 entries"), HasSubstr("still over 150K"),
                               HasSubstr("status=0")));
  const std::string dry = CommandOutput(gc + " --keep-used-within 0 --dry-run 2>&1");
  EXPECT_THAT(dry, ::testing::AllOf(HasSubstr("would evict " + b), HasSubstr("would evict " + c),
                                    Not(HasSubstr("would evict " + a))));
  auto still = bucket->Head(b);
  ASSERT_THAT(still, IsOk());
  EXPECT_TRUE(still->has_value()) << "a dry run deleted " << b;

  EXPECT_THAT(CommandOutput(gc + " --keep-used-within 0 2>&1; echo status=$?"),
              ::testing::AllOf(HasSubstr("evicted 2 entries"), HasSubstr("1 entries"),
                               HasSubstr("status=0")));
  for (const auto& [key, kept] : {std::pair{a, true}, std::pair{b, false}, std::pair{c, false}}) {
    auto head = bucket->Head(key);
    ASSERT_THAT(head, IsOk());
    EXPECT_EQ(head->has_value(), kept) << key;
  }
  EXPECT_EQ(Raw("HEAD", "gc/notes.txt").status, 200) << "gc deleted an object not its own";

  EXPECT_THAT(CommandOutput(std::string(HLOCACHE_BINARY) +
                            " gc --cache /tmp/x --max-size 1G 2>&1; echo status=$?"),
              HasSubstr("--cache takes a bucket, s3://BUCKET[/PREFIX]; for a store directory use "
                        "--dir\nstatus=1"));
}

TEST_F(S3BackendTest, AServerInFrontOfTheBucketMarksWhatItServes) {
  char tmpl[] = "/tmp/hlocache-s3-marks-XXXXXX";
  const fs::path root = ::mkdtemp(tmpl);
  const std::string url = std::string(kBucket) + "/served";
  auto made = storage::MakeS3Backend(url, {});
  ASSERT_THAT(made, IsOk());
  std::unique_ptr<storage::Bucket> bucket = std::move(*made);
  const std::string key = TestKey(801);
  ASSERT_THAT(bucket->Put(key, MakeArtifact(key, 4096, 3), {}), IsOk());
  auto listed = bucket->ListEntries();
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->size(), 1u);
  const auto uploaded = listed->front().last_use;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));

  ServerProcess host(HLOCACHE_BINARY, root / "host", {"--upstream", url});
  ASSERT_TRUE(host.started()) << host.output();
  for (int i = 0; i < 2; ++i) {  // Fetched from the bucket, then a hit on the host: both uses.
    auto r = host.Client()->Get("/v1/artifacts/" + key);
    ASSERT_TRUE(r && r->status == 200) << host.output();
  }
  bool marked = false;
  for (int i = 0; i < 100 && !marked; ++i) {
    auto entries = bucket->ListEntries();
    marked = entries && entries->size() == 1 && entries->front().last_use > uploaded;
    if (!marked) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(marked) << "the server's use left no mark\n" << host.output();
  EXPECT_EQ(host.Stop(), 0);
  std::error_code ec;
  fs::remove_all(root, ec);
}

TEST_F(S3BackendTest, MountsOnTheBucketShareFilesByPathAndGcRemovesTheirNames) {
  if (!fs::exists("/dev/fuse")) GTEST_SKIP() << "no /dev/fuse";
  char tmpl[] = "/tmp/hlocache-s3-mount-XXXXXX";
  const fs::path root = ::mkdtemp(tmpl);
  const std::string url = std::string(kBucket) + "/mounts";
  // Host 1's mount writes a file; host 2's mount, with an empty store of its own, lists it and
  // reads the same bytes, all through the bucket.
  const fs::path script = root / "mounts.sh";
  std::ofstream(script) << R"sh(set -u
H=$1; R=$2; B=$3
mounted() { for _ in $(seq 200); do mountpoint -q "$1" && return 0; sleep 0.05; done; return 1; }
mkdir -p "$R/m1" "$R/m2"
"$H" mount "$R/m1" --cache "$R/d1,$B" > "$R/m1.log" 2>&1 &
mounted "$R/m1" || { echo "m1 not mounted"; cat "$R/m1.log"; exit 1; }
head -c 100000 /dev/urandom > "$R/src"
mkdir -p "$R/m1/jax" && cp "$R/src" "$R/m1/jax/exe-abc"
for _ in $(seq 200); do
  "$H" stats --mount "$R/m1" | grep -q '"uploads":1,"pending_uploads":0' && break; sleep 0.05
done
"$H" mount "$R/m2" --cache "$R/d2,$B" > "$R/m2.log" 2>&1 &
mounted "$R/m2" || { echo "m2 not mounted"; cat "$R/m2.log"; exit 1; }
echo "listed: $(ls "$R/m2/jax")"
cmp "$R/src" "$R/m2/jax/exe-abc" && echo "same bytes"
fusermount3 -u "$R/m1"; fusermount3 -u "$R/m2"; wait
)sh";
  const std::string out = CommandOutput("bash " + script.string() + " " + HLOCACHE_BINARY + " " +
                                        root.string() + " " + url + " 2>&1");
  EXPECT_THAT(out, HasSubstr("listed: exe-abc\n")) << out;
  EXPECT_THAT(out, HasSubstr("same bytes")) << out;

  auto made = storage::MakeS3Backend(url, {});
  ASSERT_THAT(made, IsOk());
  std::unique_ptr<storage::Bucket> bucket = std::move(*made);
  auto files = bucket->ListFiles("files", "jax/", 0);
  ASSERT_THAT(files, IsOk());
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ(files->front().path, "jax/exe-abc");
  EXPECT_EQ(files->front().size, 100000u);
  // Gc deletes the file's name with it: no listing names a file that is gone.
  EXPECT_THAT(CommandOutput(std::string(HLOCACHE_BINARY) + " gc --cache " + url +
                            " --max-size 0 --keep-used-within 0 2>&1"),
              HasSubstr("evicted 1 entries"));
  files = bucket->ListFiles("files", "", 0);
  ASSERT_THAT(files, IsOk());
  EXPECT_TRUE(files->empty());
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace
}  // namespace hlocache::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new hlocache::testing::Cluster);
  return RUN_ALL_TESTS();
}
