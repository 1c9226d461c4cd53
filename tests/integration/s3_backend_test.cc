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

}  // namespace
}  // namespace hlocache::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new hlocache::testing::Cluster);
  return RUN_ALL_TESTS();
}
