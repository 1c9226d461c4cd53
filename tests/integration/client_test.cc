// The client cache against real servers and real failures: two processes sharing a directory
// through its server, dead and silent servers, a server handing out corrupt bytes, read-only
// clients, and write-back.
#include "client/cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <zstd.h>
#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "client/commands.h"
#include "common/fast_hash.h"
#include "compiler/artifact/container.h"
#include "tests/hostile_graphs.h"
#include "tests/integration/server_harness.h"
#include "tests/integration/test_directory.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_BINARY
#error "HLOCACHE_BINARY names the hlocache executable under test"
#endif

namespace hlocache::testing {
namespace {

namespace fs = std::filesystem;
using client::Cache;
using client::CacheOptions;
using client::Source;
using ::testing::HasSubstr;

std::string Module(int variant) {
  return "HloModule client" + std::to_string(variant) +
         "\nENTRY e {\n  a = f32[32] parameter(0)\n  c = f32[] constant(" +
         std::to_string(variant) +
         ")\n  d = f32[32] broadcast(c), dimensions={}\n  ROOT s = f32[32] add(a, d)\n}\n";
}

class ClientTest : public TestDirectory {
 protected:
  CacheOptions Options() {
    CacheOptions o;
    o.connect_timeout = std::chrono::milliseconds(200);
    o.request_timeout = std::chrono::milliseconds(500);
    o.backoff.min_backoff = std::chrono::seconds(60);
    o.backoff.max_backoff = std::chrono::seconds(60);
    o.worker_binary = HLOCACHE_BINARY;
    o.log = [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    return o;
  }
  uint64_t Entries(const fs::path& dir) {
    cache::StoreOptions o;
    o.read_only = true;
    auto store = cache::Store::Open(dir, o);
    if (!store) return 0;
    return (*store)->Stats()->entries;
  }
  std::mutex log_mu_;
  std::string log_;
};

// Runs `hlocache run --cache SPEC FILE` as its own process; its standard output.
std::string RunProcess(const std::string& spec, const fs::path& file) {
  return CommandOutput(std::string(HLOCACHE_BINARY) + " run --cache " + spec + " " + file.string());
}

TEST_F(ClientTest, ATextAskedForAgainIsAnsweredFromMemoryWithoutKeyingIt) {
  auto cache = Cache::Open((root_ / "store").string(), Options());
  ASSERT_THAT(cache, IsOk());
  const std::string text = Module(41);
  auto first = (*cache)->GetOrCompile(text);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->source, Source::kCompiledHere);
  auto again = (*cache)->GetOrCompile(text);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->source, Source::kMemory);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(again->executable, first->executable);
  EXPECT_EQ((*cache)->stats().keys_memoized, 1u);
  // Another text of the same module (a comment, other spacing) is keyed: the same key, from
  // memory, but not by the memo.
  auto respelled = (*cache)->GetOrCompile("// the same module\n" + text);
  ASSERT_THAT(respelled, IsOk());
  EXPECT_EQ(respelled->key, first->key);
  EXPECT_EQ(respelled->source, Source::kMemory);
  EXPECT_EQ((*cache)->stats().keys_memoized, 1u);
  // Another target is another key.
  auto other = (*cache)->GetOrCompile(text, "cpu-x86-64-v2");
  ASSERT_THAT(other, IsOk());
  EXPECT_NE(other->key, first->key);
  EXPECT_EQ((*cache)->stats().keys_memoized, 1u);
  EXPECT_EQ((*cache)->stats().memory_hits, 2u);
}

TEST_F(ClientTest, TwoProcessesShareADirectoryThroughItsServer) {
  ServerProcess server(HLOCACHE_BINARY, root_ / "shared", {"--access-log", ""});
  ASSERT_TRUE(server.started()) << server.output();
  const fs::path file = root_ / "m.hlo";
  std::ofstream(file) << Module(1);
  // Both name the directory; neither can open it (the server holds it), so both go through
  // the server: the first has it compiled there, the second is served what it built.
  const std::string first = RunProcess((root_ / "shared").string(), file);
  EXPECT_THAT(first, HasSubstr("from: compiled by the server (" + server.url() + ")"));
  const std::string second = RunProcess((root_ / "shared").string(), file);
  EXPECT_THAT(second, HasSubstr("from: remote (" + server.url() + ")"));
  auto result_line = [](const std::string& s) { return s.substr(s.find("result 0")); };
  EXPECT_EQ(result_line(first).substr(0, 60), result_line(second).substr(0, 60));
  auto stats = nlohmann::json::parse(server.Client()->Get("/v1/stats")->body);
  EXPECT_EQ(stats["compiles"], 1);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ClientTest, ADeadServerCostsOneConnectTimeoutThenNothing) {
  auto cache = Cache::Open("http://127.0.0.1:1", Options());
  ASSERT_THAT(cache, IsOk());
  auto first = (*cache)->GetOrCompile(Module(2));
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->source, Source::kCompiledHere);
  // Refused at once, well within the 200 ms connect timeout (the bound is loose: shared machine).
  EXPECT_LT(first->lookup_seconds, 2.0);
  auto second = (*cache)->GetOrCompile(Module(3));
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->source, Source::kCompiledHere);
  // Resting after its failure: not asked again.
  EXPECT_EQ((*cache)->stats().tier_errors, 1u);
  EXPECT_THAT(log_, HasSubstr("skipped for"));
}

TEST_F(ClientTest, ASilentServerIsBoundedByTheTimeouts) {
  // Accepts connections (the kernel's backlog does) and never answers.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto cache = Cache::Open(url, Options());
  ASSERT_THAT(cache, IsOk());
  auto exe = (*cache)->GetOrCompile(Module(4));
  ASSERT_THAT(exe, IsOk());
  EXPECT_EQ(exe->source, Source::kCompiledHere);
  // One GET that times out after the 500 ms request timeout, and no compile request (the
  // server is resting by then): far below the bound even on a loaded machine.
  EXPECT_GE(exe->lookup_seconds, 0.4);
  EXPECT_LT(exe->lookup_seconds, 3.0);
  EXPECT_LT(exe->total_seconds - exe->compile_seconds, 3.5);
  ::close(fd);
}

TEST_F(ClientTest, ACorruptArtifactFromAServerIsDroppedAndRebuilt) {
  // A server whose every artifact has one flipped byte, and which cannot compile.
  std::string good;
  {
    auto builder = Cache::Open("", Options());
    ASSERT_THAT(builder, IsOk());
    auto exe = (*builder)->GetOrCompile(Module(5));
    ASSERT_THAT(exe, IsOk());
    good = *exe->artifact;
  }
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x10;
  httplib::Server liar;
  liar.set_tcp_nodelay(true);
  liar.Get(R"(/v1/artifacts/.*)", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(bad, "application/octet-stream");
  });
  liar.Post("/v1/compile",
            [](const httplib::Request&, httplib::Response& res) { res.status = 503; });
  const int port = liar.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { liar.listen_after_bind(); });
  auto cache = Cache::Open("http://127.0.0.1:" + std::to_string(port), Options());
  ASSERT_THAT(cache, IsOk());
  auto exe = (*cache)->GetOrCompile(Module(5));
  liar.stop();
  serving.join();
  ASSERT_THAT(exe, IsOk());
  EXPECT_EQ(exe->source, Source::kCompiledHere);
  EXPECT_EQ((*cache)->stats().corrupt_dropped, 1u);
  EXPECT_THAT(log_, HasSubstr("dropped a bad artifact"));
  // The same executable as a clean build (the header's compile time aside).
  auto rebuilt = compiler::DecodeArtifact(*exe->artifact);
  auto clean = compiler::DecodeArtifact(good);
  ASSERT_TRUE(rebuilt && clean);
  EXPECT_TRUE(rebuilt->payload == clean->payload) << "the rebuilt executable differs";
  EXPECT_EQ(rebuilt->header.key, clean->header.key);
}

TEST_F(ClientTest, ReadOnlyClientsNeverWrite) {
  ServerProcess server(HLOCACHE_BINARY, root_ / "origin", {"--access-log", ""});
  ASSERT_TRUE(server.started());
  CacheOptions options = Options();
  options.read_only = true;
  {
    auto cache = Cache::Open((root_ / "local").string() + "," + server.url(), options);
    ASSERT_THAT(cache, IsOk());
    // The local directory does not exist and a read-only store is not created: skipped.
    auto exe = (*cache)->GetOrCompile(Module(6));
    ASSERT_THAT(exe, IsOk());
    EXPECT_EQ(exe->source, Source::kCompiledByServer);
    (*cache)->Flush();
    EXPECT_EQ((*cache)->stats().uploads, 0u);
  }
  // Now with an existing local store: a read-only client fills neither it nor the server.
  {
    auto make = cache::Store::Open(root_ / "local2");
    ASSERT_THAT(make, IsOk());
  }
  {
    auto cache = Cache::Open((root_ / "local2").string() + ",http://127.0.0.1:1", options);
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(7));
    ASSERT_THAT(exe, IsOk());
    EXPECT_EQ(exe->source, Source::kCompiledHere);
  }
  EXPECT_EQ(Entries(root_ / "local2"), 0u);
  auto stats = nlohmann::json::parse(server.Client()->Get("/v1/stats")->body);
  EXPECT_EQ(stats["puts"], 0) << "a read-only client uploaded";
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ClientTest, MissesAreWrittenBackToTheTiersThatMissed) {
  ServerProcess server(HLOCACHE_BINARY, root_ / "origin", {"--access-log", ""});
  ASSERT_TRUE(server.started());
  const std::string spec = (root_ / "local").string() + "," + server.url();
  std::string key;
  {
    auto cache = Cache::Open(spec, Options());
    ASSERT_THAT(cache, IsOk());
    auto exe = (*cache)->GetOrCompile(Module(8));
    ASSERT_THAT(exe, IsOk());
    EXPECT_EQ(exe->source, Source::kCompiledByServer);
    key = exe->key;
    auto again = (*cache)->GetOrCompile(Module(8));
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->source, Source::kMemory);
  }
  // The local store got a copy: a new process finds it there, without the server.
  EXPECT_EQ(Entries(root_ / "local"), 1u);
  EXPECT_EQ(server.Stop(), 0);
  auto cache = Cache::Open(spec, Options());
  ASSERT_THAT(cache, IsOk());
  auto exe = (*cache)->GetOrCompile(Module(8));
  ASSERT_THAT(exe, IsOk());
  EXPECT_EQ(exe->source, Source::kLocal);
  EXPECT_EQ(exe->key, key);
  // A module compiled here goes to every writable tier (the server is gone: only local).
  auto here = (*cache)->GetOrCompile(Module(9));
  ASSERT_THAT(here, IsOk());
  EXPECT_EQ(here->source, Source::kCompiledHere);
  (*cache)->Flush();
  EXPECT_EQ((*cache)->stats().uploads, 1u);
}

TEST_F(ClientTest, HttpsServersAreVerifiedAgainstTheGivenCa) {
  const std::string cert = (root_ / "cert.pem").string(), key = (root_ / "key.pem").string();
  ASSERT_TRUE(MakeSelfSignedCertificate(cert, key)) << "openssl could not make a certificate";
  ServerProcess server(HLOCACHE_BINARY, root_ / "tls",
                       {"--tls-cert", cert, "--tls-key", key, "--access-log", ""});
  ASSERT_TRUE(server.started()) << server.output();
  ASSERT_EQ(server.url().rfind("https://", 0), 0u);
  CacheOptions trusting = Options();
  trusting.ca_cert = cert;
  auto cache = Cache::Open(server.url(), trusting);
  ASSERT_THAT(cache, IsOk());
  auto exe = (*cache)->GetOrCompile(Module(11));
  ASSERT_THAT(exe, IsOk());
  EXPECT_EQ(exe->source, Source::kCompiledByServer);
  // Without the CA the server's certificate does not verify: the server is skipped, never
  // trusted, and the module is compiled here.
  auto doubting = Cache::Open(server.url(), Options());
  ASSERT_THAT(doubting, IsOk());
  auto here = (*doubting)->GetOrCompile(Module(12));
  ASSERT_THAT(here, IsOk());
  EXPECT_EQ(here->source, Source::kCompiledHere);
  EXPECT_THAT(log_, HasSubstr("skipped"));
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ClientTest, AModuleNoCompilerTakesDoesNotRestTheServer) {
  ServerProcess server(HLOCACHE_BINARY, root_ / "origin", {"--access-log", ""});
  ASSERT_TRUE(server.started());
  auto cache = Cache::Open(server.url(), Options());
  ASSERT_THAT(cache, IsOk());
  EXPECT_THAT((*cache)->GetOrCompile(kUnsupportedModule),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("custom-call")));
  // The server answered 422 for that one; it is still asked for the next.
  auto next = (*cache)->GetOrCompile(Module(13));
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->source, Source::kCompiledByServer);
  EXPECT_EQ((*cache)->stats().tier_errors, 0u);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(ClientTest, InitializeCacheIsProcessWide) {
  const std::string spec = (root_ / "global").string();
  ASSERT_THAT(client::initialize_cache(spec, Options()), IsOk());
  EXPECT_THAT(client::initialize_cache(spec, Options()), IsOk());
  EXPECT_THAT(client::initialize_cache(spec + "-other", Options()),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("already initialized")));
  ASSERT_NE(client::global_cache(), nullptr);
  auto exe = client::global_cache()->GetOrCompile(Module(10));
  ASSERT_THAT(exe, IsOk());
  EXPECT_EQ(exe->source, Source::kCompiledHere);
  EXPECT_THAT(client::global_cache()->GetOrCompile("HloModule broken\nENTRY {"),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(ClientTest, PrewarmThenExportThenImportGivesTheSameKeysAndBytes) {
  fs::create_directories(root_ / "hlo" / "sub");
  for (int i = 0; i < 3; ++i)
    std::ofstream(root_ / "hlo" / ("m" + std::to_string(i) + ".hlo")) << Module(20 + i);
  std::ofstream(root_ / "hlo" / "sub" / "unsupported.hlo") << kUnsupportedModule;
  std::ofstream(root_ / "hlo" / "notes.txt") << "not a module";
  client::PrewarmSettings settings;
  settings.cache = (root_ / "warm").string();
  settings.worker_binary = HLOCACHE_BINARY;
  std::ostringstream out, err;
  ASSERT_EQ(client::RunPrewarm({(root_ / "hlo").string()}, settings, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("| 3 | 0 | 1 | 0 |")) << out.str();
  std::ostringstream again, again_err;
  ASSERT_EQ(client::RunPrewarm({(root_ / "hlo").string()}, settings, again, again_err), 0);
  EXPECT_THAT(again.str(), HasSubstr("| 0 | 3 | 1 | 0 |")) << again.str();

  const std::string bundle = (root_ / "warm.bundle").string();
  std::ostringstream eo, ee;
  ASSERT_EQ(client::RunExport((root_ / "warm").string(), bundle, eo, ee), 0) << ee.str();
  EXPECT_THAT(eo.str(), HasSubstr("exported 3 entries"));
  std::ostringstream io, ie;
  ASSERT_EQ(client::RunImport(bundle, (root_ / "cold").string(), io, ie), 0) << ie.str();
  EXPECT_THAT(io.str(), HasSubstr("imported 3 entries"));
  cache::StoreOptions ro;
  ro.read_only = true;
  auto warm = cache::Store::Open(root_ / "warm", ro);
  auto cold = cache::Store::Open(root_ / "cold", ro);
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(cold, IsOk());
  auto keys = (*warm)->List({});
  ASSERT_THAT(keys, IsOk());
  ASSERT_EQ(keys->size(), 3u);
  for (const auto& e : *keys) {
    auto a = (*warm)->Get(e.key);
    auto b = (*cold)->Get(e.key);
    ASSERT_TRUE(a && *a && b && *b) << e.key << " missing after import";
    EXPECT_TRUE(**a == **b) << e.key << " differs after import";
  }
  EXPECT_EQ((*cold)->Stats()->entries, 3u);

  // A damaged bundle is refused, entry by entry or as a whole, and says so.
  std::string bytes;
  {
    std::ifstream in(bundle, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(root_ / "bad.bundle", std::ios::binary) << bytes;
  std::ostringstream bo, be;
  EXPECT_EQ(client::RunImport((root_ / "bad.bundle").string(), (root_ / "cold2").string(), bo, be),
            1);
  EXPECT_FALSE(be.str().empty());
}

// A bundle manifest's entry (schema/bundle.md) for `artifact` stored under `key`.
std::string ManifestEntry(const std::string& key, const std::string& artifact) {
  return "{\"key\":\"" + key + "\",\"size\":" + std::to_string(artifact.size()) + ",\"xxh3\":\"" +
         Hex128(artifact.data(), artifact.size()) + "\"}";
}

// `content` as one zstd frame, as `hlocache export` writes a bundle.
std::string ZstdFrame(const std::string& content) {
  std::string frame(ZSTD_compressBound(content.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 3));
  return frame;
}

// A bundle comes from elsewhere (a CI job's artifact): a manifest of the wrong shape is refused
// as a whole with one line that names the entry, and nothing is stored. Each of these ended the
// import with "internal error: [json.exception.type_error...]".
TEST_F(ClientTest, AMalformedBundleManifestIsRefusedNamingTheEntry) {
  const std::string key = TestKey(90);
  const std::string artifact = MakeArtifact(key, 300, 90);
  const std::string good_entry = ManifestEntry(key, artifact);
  auto bundle_with = [&](const std::string& entries) {
    const std::string content = "hlocache-bundle 1\n{\"entries\":[" + entries + "]}\n" + artifact;
    const fs::path path = root_ / "manifest.bundle";
    std::ofstream(path, std::ios::binary) << ZstdFrame(content);
    return path.string();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good_entry + ",1", "manifest entry 2 is not a JSON object"},
      {good_entry + ",{\"key\":5,\"size\":0,\"xxh3\":\"\"}", "entry 2: \"key\""},
      {"{\"key\":\"" + key + "\",\"size\":\"300\",\"xxh3\":\"\"}", "entry 1: \"size\""},
      {"{\"key\":\"" + key + "\",\"size\":-1,\"xxh3\":\"\"}", "entry 1: \"size\""},
      {"{\"key\":\"" + key + "\",\"size\":3}", "entry 1: \"xxh3\""},
  };
  for (const auto& [entries, says] : cases) {
    std::ostringstream out, err;
    EXPECT_EQ(client::RunImport(bundle_with(entries), (root_ / "refused").string(), out, err), 1)
        << entries;
    const std::string said = err.str();
    EXPECT_THAT(said, HasSubstr(says)) << entries;
    EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  }
  EXPECT_FALSE(fs::exists(root_ / "refused")) << "refused before the cache was opened";
  // The same bundle with a well-formed manifest imports.
  std::ostringstream out, err;
  EXPECT_EQ(client::RunImport(bundle_with(good_entry), (root_ / "accepted").string(), out, err), 0)
      << err.str();
  EXPECT_THAT(out.str(), HasSubstr("imported 1 entries"));
}

// A bundle is one zstd frame of the current format (schema/bundle.md), and import reads nothing
// else: libzstd would decode a frame of zstd's 0.x formats with a window no bound holds (28
// bytes asked for 96 MB), and a second frame after the first could be one of those.
TEST_F(ClientTest, ABundleIsReadOnlyAsOneZstdFrameOfTheCurrentFormat) {
  const std::string key = TestKey(91);
  const std::string artifact = MakeArtifact(key, 300, 91);
  const std::string head =
      "hlocache-bundle 1\n{\"entries\":[" + ManifestEntry(key, artifact) + "]}\n";
  auto import = [&](const std::string& name, const std::string& bytes, std::string& said) {
    std::ofstream(root_ / name, std::ios::binary) << bytes;
    std::ostringstream out, err;
    const int status =
        client::RunImport((root_ / name).string(), (root_ / ("cache-" + name)).string(), out, err);
    said = err.str();
    return status;
  };
  std::string said;
  ASSERT_EQ(import("whole", ZstdFrame(head + artifact), said), 0) << said;

  EXPECT_EQ(import("legacy", LegacyZstdFrame(), said), 1);
  EXPECT_THAT(said,
              HasSubstr("is not an hlocache bundle (not a zstd frame of the current format)"));
  // A skippable frame (magic 0x184D2A50, 4 bytes of content) ahead of the bundle.
  const std::string skippable(
      "\x50\x2a\x4d\x18\x04\x00\x00\x00"
      "abcd",
      12);
  EXPECT_EQ(import("skippable", skippable + ZstdFrame(head + artifact), said), 1);
  EXPECT_THAT(said, HasSubstr("not a zstd frame of the current format"));
  // The same content split over two frames: the entry lies past the first frame's end.
  EXPECT_EQ(import("split", ZstdFrame(head) + ZstdFrame(artifact), said), 1);
  EXPECT_THAT(said, HasSubstr("ends inside " + key));
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << said;
  auto stored = [&](const std::string& name) -> uint64_t {
    const fs::path dir = root_ / ("cache-" + name);
    if (!fs::exists(dir)) return 0;
    cache::StoreOptions read_only;
    read_only.read_only = true;
    auto store = cache::Store::Open(dir, read_only);
    return store ? (*store)->Stats()->entries : 99;
  };
  EXPECT_EQ(stored("whole"), 1u);
  for (const char* refused : {"legacy", "skippable", "split"}) EXPECT_EQ(stored(refused), 0u);
}

}  // namespace
}  // namespace hlocache::testing
