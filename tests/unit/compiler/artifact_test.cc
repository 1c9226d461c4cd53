// The artifact container (schema/artifact-container.md) and the in-memory loader.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "compiler/artifact/container.h"
#include "compiler/artifact/graph_section.h"
#include "compiler/artifact/loader.h"
#include "compiler/target.h"
#include "tests/hostile_graphs.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ArtifactHeader SampleHeader() {
  ArtifactHeader h;
  h.key = "v1-0123456789abcdef0123456789abcdef";
  h.target = HostCpuTarget();
  h.compiler_id = DefaultCompilerId();
  h.payload_kind = std::string(kPayloadSharedObject);
  h.entry_symbol = "hlocache_entry";
  h.parameter_shapes = {"f32[2,3]", "s32[]"};
  h.result_shape = "(f32[2,3], pred[])";
  h.compile_seconds = 12.5;
  return h;
}

TEST(ArtifactContainerTest, RoundTripsHeaderAndPayload) {
  const std::string payload(
      "\x7f"
      "ELF\0\1\2 payload bytes",
      22);
  const std::string bytes = EncodeArtifact(SampleHeader(), payload);
  auto decoded = DecodeArtifact(bytes);
  ASSERT_THAT(decoded, IsOk());
  const ArtifactHeader& h = decoded->header;
  EXPECT_EQ(h.key, SampleHeader().key);
  EXPECT_EQ(h.target, SampleHeader().target);
  EXPECT_EQ(h.compiler_id, SampleHeader().compiler_id);
  EXPECT_EQ(h.payload_kind, "shared-object");
  EXPECT_EQ(h.entry_symbol, "hlocache_entry");
  EXPECT_EQ(h.parameter_shapes, SampleHeader().parameter_shapes);
  EXPECT_EQ(h.result_shape, "(f32[2,3], pred[])");
  EXPECT_EQ(h.compile_seconds, 12.5);
  EXPECT_EQ(decoded->payload, payload);
  // The layout the spec gives: 40 fixed bytes around the header and the payload.
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89HLOART\n", 8));
  uint32_t header_bytes = 0;
  for (int i = 3; i >= 0; --i)
    header_bytes = header_bytes << 8 | static_cast<uint8_t>(bytes[12 + i]);
  EXPECT_EQ(bytes[16], '{');  // The header is JSON.
  EXPECT_EQ(bytes.size(), 40 + header_bytes + payload.size());
  EXPECT_EQ(bytes.substr(24 + header_bytes, payload.size()), payload);
}

TEST(ArtifactContainerTest, EveryFlippedBitIsRefusedNeverDecoded) {
  const std::string good = EncodeArtifact(SampleHeader(), "payload");
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit : {0, 7}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      auto decoded = DecodeArtifact(bad);
      ASSERT_FALSE(decoded.has_value()) << "byte " << i << " bit " << bit << " went unnoticed";
      const StatusCode code = decoded.error().code();
      if (i < 8) {
        EXPECT_EQ(code, StatusCode::kInvalidArgument) << "magic byte " << i;
      } else if (i < 12) {
        EXPECT_EQ(code, StatusCode::kFailedPrecondition) << "version byte " << i;
      } else {
        EXPECT_EQ(code, StatusCode::kDataLoss)
            << "byte " << i << ": " << decoded.error().ToString();
      }
    }
  }
}

TEST(ArtifactContainerTest, TruncatedOrExtendedContainersAreRefused) {
  const std::string good = EncodeArtifact(SampleHeader(), std::string(1000, 'p'));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeArtifact(std::string_view(good).substr(0, n)).has_value()) << n;
  }
  EXPECT_THAT(DecodeArtifact(good + "x"), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(DecodeArtifact("#!/bin/sh\nrm -rf /\n"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not an hlocache artifact")));
}

TEST(ArtifactGraphTest, TheCarriedGraphRoundTripsAndGarbageIsRefused) {
  std::string text = "HloModule m\n\nENTRY e {\n";
  for (int i = 0; i < 2000; ++i) {
    text += "  a" + std::to_string(i) + " = f32[8] parameter(" + std::to_string(i) + ")\n";
  }
  text += "}\n";
  const std::string encoded = EncodeGraph(text);
  ASSERT_FALSE(encoded.empty());
  EXPECT_LT(encoded.size(), text.size() / 3) << "compressed";
  auto decoded = DecodeGraph(encoded);
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(*decoded, text);

  ArtifactHeader header = SampleHeader();
  header.graph_zstd = encoded;
  auto round = DecodeArtifact(EncodeArtifact(header, "payload"));
  ASSERT_THAT(round, IsOk());
  EXPECT_EQ(round->header.graph_zstd, encoded);
  EXPECT_EQ(PeekCompileSeconds(EncodeArtifact(header, "p")), header.compile_seconds);

  for (const std::string& bad : {std::string(), std::string("abc"), std::string("!!!!"),
                                 std::string("AAAAAAAA"), encoded.substr(0, encoded.size() - 4)}) {
    EXPECT_THAT(DecodeGraph(bad), StatusIs(StatusCode::kDataLoss)) << "'" << bad << "'";
  }
  // A graph whose encoding would not fit the header is left out, not truncated.
  std::string random(kMaxEncodedGraphBytes, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : random) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  EXPECT_EQ(EncodeGraph(random), "");
}

using hlocache::testing::Base64;
using hlocache::testing::LegacyZstdFrame;
using hlocache::testing::PeakResidentBytes;
using hlocache::testing::ZstdFrame;

TEST(ArtifactGraphTest, ReadInPiecesTheGraphIsTheWholeText) {
  std::string text;
  for (int i = 0; text.size() < (1 << 20); ++i)
    text += "x" + std::to_string(i * 2654435761u) + "\n";
  auto reader = GraphReader::Open(EncodeGraph(text));
  ASSERT_THAT(reader, IsOk());
  EXPECT_EQ((*reader)->size(), text.size());
  std::string joined;
  int pieces = 0;
  while (true) {
    auto piece = (*reader)->Next();
    ASSERT_THAT(piece, IsOk());
    if (piece->empty()) break;
    joined.append(*piece);
    ++pieces;
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(pieces, 8) << "handed out a piece at a time, not whole";
  EXPECT_THAT((*reader)->Next(), IsOk()) << "and stays at its end";
  EXPECT_EQ(*DecodeGraph(Base64(ZstdFrame(5, "hello"))), "hello");
}

// A graph comes from whoever uploaded the artifact: 24 bytes of base64 claimed a gigabyte, and
// reading them once allocated and zeroed that gigabyte before finding the one byte they hold.
// Now none of these costs more than zstd's bounded window: one segment of a gigabyte, a small
// window and a gigabyte of content, and a gigabyte's window.
TEST(ArtifactGraphTest, AGraphClaimingAGigabyteCostsNoGigabyte) {
  constexpr uint64_t kGigabyte = uint64_t{1} << 30;
  const std::string one_segment = Base64(ZstdFrame(kGigabyte, "x"));
  ASSERT_LE(one_segment.size(), 24u);
  const uint64_t before = PeakResidentBytes(0, /*reset=*/true);
  ASSERT_GT(before, 0u) << "no VmHWM in /proc/self/status";
  for (const std::string& claim :
       {one_segment, Base64(ZstdFrame(kGigabyte, "x", "", /*window_exponent=*/0)),
        Base64(ZstdFrame(kGigabyte, "x", "", /*window_exponent=*/20))}) {
    EXPECT_THAT(DecodeGraph(claim), StatusIs(StatusCode::kDataLoss)) << claim;
    auto reader = GraphReader::Open(claim);
    ASSERT_THAT(reader, IsOk());
    EXPECT_EQ((*reader)->size(), kGigabyte);
    Result<std::string_view> piece = (*reader)->Next();
    for (int i = 0; i < 3 && piece && !piece->empty(); ++i) piece = (*reader)->Next();
    EXPECT_THAT(piece, StatusIs(StatusCode::kDataLoss)) << claim;
  }
  EXPECT_LT(PeakResidentBytes(0, false), before + (64 << 20)) << "before: " << before;
}

// libzstd still reads the frames of zstd's 0.x formats, and sizes their windows past the limit
// set for current frames (LegacyZstdFrame asked for 96 MB). The writer writes current frames
// only, and only those are read.
TEST(ArtifactGraphTest, AFrameOfAnOlderZstdFormatIsRefusedUnread) {
  const std::string legacy = LegacyZstdFrame();
  EXPECT_THAT(GraphReader::Open(Base64(legacy)),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a zstd frame of the current format")));
  EXPECT_THAT(DecodeGraph(Base64(legacy)), StatusIs(StatusCode::kDataLoss));
  // A skippable frame (its magic's low four bits are free) is no graph either.
  EXPECT_THAT(DecodeGraph(Base64(std::string("\x50\x2a\x4d\x18\x00\x00\x00\x00", 8) +
                                 ZstdFrame(5, "hello"))),
              StatusIs(StatusCode::kDataLoss));
  // The current format's frame beside them reads.
  EXPECT_EQ(*DecodeGraph(Base64(ZstdFrame(5, "hello"))), "hello");
}

TEST(ArtifactGraphTest, AFrameMustHoldWhatItDeclaresAndNothingAfterIt) {
  EXPECT_THAT(DecodeGraph(Base64(ZstdFrame(6, "hello"))), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(DecodeGraph(Base64(ZstdFrame(4, "hello"))), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(DecodeGraph(Base64(ZstdFrame(5, "hello", "\x01"))),
              StatusIs(StatusCode::kDataLoss, HasSubstr("after its zstd frame")));
  // A second frame after the first is not part of the graph either.
  EXPECT_THAT(DecodeGraph(Base64(ZstdFrame(5, "hello") + ZstdFrame(1, "!"))),
              StatusIs(StatusCode::kDataLoss, HasSubstr("after its zstd frame")));
  // Cut inside its block.
  EXPECT_THAT(DecodeGraph(Base64(ZstdFrame(5, "hello").substr(0, 15))),
              StatusIs(StatusCode::kDataLoss));
  // What it declares, in a frame of several segments, is read.
  EXPECT_EQ(*DecodeGraph(Base64(ZstdFrame(5, "hello", "", /*window_exponent=*/0))), "hello");
}

TEST(ArtifactContainerTest, NewerFormatVersionSaysSo) {
  std::string bytes = EncodeArtifact(SampleHeader(), "p");
  bytes[8] = 2;
  EXPECT_THAT(DecodeArtifact(bytes),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("format version 2")));
}

TEST(ArtifactContainerTest, HeaderMustHoldEveryFieldWithItsType) {
  EXPECT_THAT(DecodeArtifact(EncodeArtifactWithRawHeader("[1, 2]", "p")),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a JSON object")));
  EXPECT_THAT(DecodeArtifact(EncodeArtifactWithRawHeader("{\"key\": ", "p")),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a JSON object")));
  EXPECT_THAT(DecodeArtifact(EncodeArtifactWithRawHeader(R"({"key": "k"})", "p")),
              StatusIs(StatusCode::kDataLoss, HasSubstr("'target'")));
  EXPECT_THAT(DecodeArtifact(EncodeArtifactWithRawHeader(
                  R"({"key":"k","target":"t","compiler_id":"c","payload_kind":"shared-object",
              "entry_symbol":"e","result_shape":"f32[]","parameter_shapes":"f32[]",
              "compile_seconds":1})",
                  "p")),
              StatusIs(StatusCode::kDataLoss, HasSubstr("'parameter_shapes'")));
  // Unknown fields are ignored (later writers may add some within version 1).
  auto decoded = DecodeArtifact(EncodeArtifactWithRawHeader(
      R"({"key":"k","target":"t","compiler_id":"c","payload_kind":"shared-object",
          "entry_symbol":"e","result_shape":"f32[]","parameter_shapes":[],
          "compile_seconds":1,"added_later":{"x":1}})",
      "p"));
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(decoded->header.entry_symbol, "e");
}

// ---------------------------------------------------------------------------------------------
// The loader, on a shared object the system compiler builds now.

class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/hlocache-loader-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const fs::path dir = tmpl;
    const fs::path source = dir / "lib.cc";
    std::ofstream(source) << "extern \"C\" int hlocache_entry(int a, int b) { return a * b + 7; }\n"
                             "extern \"C\" int other(void) { return 42; }\n";
    const fs::path so = dir / "lib.so";
    const std::string command =
        "c++ -shared -fPIC -O1 -o '" + so.string() + "' '" + source.string() + "' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream in(so, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    shared_object_ = new std::string(ss.str());
    fs::remove_all(dir);
  }
  static void TearDownTestSuite() { delete shared_object_; }

  static std::string Artifact(ArtifactHeader h = SampleHeader()) {
    return EncodeArtifact(h, *shared_object_);
  }

  static std::string* shared_object_;
};
std::string* LoaderTest::shared_object_ = nullptr;

std::string Maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(LoaderTest, LoadsFromMemoryAndRunsTheEntry) {
  const std::string bytes = Artifact();
  auto loaded = LoadedExecutable::Load(bytes);
  ASSERT_THAT(loaded, IsOk());
  auto entry = reinterpret_cast<int (*)(int, int)>((*loaded)->entry());
  EXPECT_EQ(entry(6, 7), 49);
  auto other = (*loaded)->Symbol("other");
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(reinterpret_cast<int (*)()>(*other)(), 42);
  EXPECT_THAT((*loaded)->Symbol("absent"), StatusIs(StatusCode::kNotFound));
  // Mapped from a memory file, not from any path on disk.
  const std::string maps = Maps();
  EXPECT_THAT(maps, HasSubstr("/memfd:hlocache-" + SampleHeader().key));
  loaded->reset();
  EXPECT_THAT(Maps(), ::testing::Not(HasSubstr("/memfd:hlocache-" + SampleHeader().key)))
      << "the library stayed mapped after its last owner went away";
}

TEST_F(LoaderTest, CorruptArtifactIsNeverMapped) {
  std::string bytes = Artifact();
  bytes[bytes.size() / 2] ^= 0x20;  // Inside the shared object.
  EXPECT_THAT(LoadedExecutable::Load(bytes), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(Maps(), ::testing::Not(HasSubstr("/memfd:hlocache-")));
}

TEST_F(LoaderTest, RefusesWhatThisHostCannotRun) {
  ArtifactHeader h = SampleHeader();
  h.target = "cuda-sm_90";
  EXPECT_THAT(LoadedExecutable::Load(Artifact(h)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("cuda-sm_90")));
  h = SampleHeader();
  h.target = "cpu-x86-64-v9";
  EXPECT_THAT(LoadedExecutable::Load(Artifact(h)), StatusIs(StatusCode::kFailedPrecondition));
  h = SampleHeader();
  h.payload_kind = std::string(kPayloadCubinPlan);
  EXPECT_THAT(LoadedExecutable::Load(Artifact(h)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("cubin+plan")));
  EXPECT_TRUE(RunsOnHost("cpu-x86-64-v2"));
  EXPECT_TRUE(RunsOnHost(HostCpuTarget()));
  EXPECT_FALSE(RunsOnHost("cpu-x86-64-v1"));
  EXPECT_FALSE(RunsOnHost("cpu-x86-64-v22"));
}

TEST_F(LoaderTest, BadPayloadsAndMissingEntriesAreClearErrors) {
  ArtifactHeader h = SampleHeader();
  auto garbage = LoadedExecutable::Load(EncodeArtifact(h, "this is not an ELF file"));
  EXPECT_THAT(garbage, StatusIs(StatusCode::kInvalidArgument, HasSubstr("cannot load")));
  h.entry_symbol = "no_such_function";
  EXPECT_THAT(LoadedExecutable::Load(Artifact(h)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no_such_function")));
  EXPECT_THAT(Maps(), ::testing::Not(HasSubstr("/memfd:hlocache-")))
      << "a refused library stayed mapped";
}

}  // namespace
}  // namespace hlocache::compiler
