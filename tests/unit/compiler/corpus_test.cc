// Walks the whole shared corpus: every module parses and keys; the invalid ones are rejected
// with a located error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/hlo/canonical_pipeline.h"
#include "compiler/hlo/parser.h"
#include "keying/keying.h"
#include "tests/unit/compiler/corpus_files.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "../shared/corpus"
#endif
#ifndef HLOCACHE_CORPUS_KEYS
#error "HLOCACHE_CORPUS_KEYS names tests/data/corpus_keys.tsv"
#endif

namespace hlocache {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(CorpusTest, EveryModuleParsesAndKeys) {
  std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  int elided = 0;
  std::map<std::string, std::string> keys;
  for (const std::string& f : files) {
    auto module = hlo::ParseModuleFile(f);
    ASSERT_THAT(module, IsOk()) << f;
    keying::KeySettings strict;
    strict.target = "cpu-x86-64-v3";
    auto keyed = keying::KeyModule(*module, strict);
    if (module->HasElidedConstants()) {
      // Refused without consent, keyed with it.
      EXPECT_THAT(keyed, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("elided"))) << f;
      ++elided;
      strict.allow_elided_constants = true;
      keyed = keying::KeyModule(*module, strict);
    }
    ASSERT_THAT(keyed, IsOk()) << f;
    EXPECT_TRUE(cache::IsWellFormedKey(keyed->key.text)) << keyed->key.text;
    keys[f] = keyed->key.text;
  }
  std::printf("keyed %zu corpus modules (%d with elided constants)\n", files.size(), elided);
  // Keying is deterministic: a second pass gives the same keys.
  for (size_t i = 0; i < files.size(); i += 7) {
    keying::KeySettings s;
    s.target = "cpu-x86-64-v3";
    s.allow_elided_constants = true;
    auto again = keying::KeyFile(files[i], s);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->key.text, keys[files[i]]) << files[i];
  }
}

// Keys must never change by accident: a changed key makes every cache in the fleet miss. The
// recorded file holds, for every corpus module, the XXH3-128 of its canonical text and its key
// for a fixed target and compiler id (so the record does not depend on this machine's
// compiler). A deliberate change of the canonical form records anew:
//   HLOCACHE_RECORD_CORPUS_KEYS=1 build/tests/corpus_test --gtest_filter='*Recorded*'
TEST(CorpusTest, CanonicalTextsAndKeysAreTheRecordedOnes) {
  const fs::path corpus(HLOCACHE_CORPUS_DIR);
  std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  std::ostringstream now;
  for (const std::string& f : files) {
    keying::KeySettings settings;
    settings.target = "cpu-x86-64-v3";
    settings.compiler_id = "recorded/compiler-1";
    settings.allow_elided_constants = true;
    auto keyed = keying::KeyFile(f, settings);
    ASSERT_THAT(keyed, IsOk()) << f;
    now << fs::relative(f, corpus).generic_string() << "\t" << keyed->key.graph.Hex() << "\t"
        << keyed->key.text << "\n";
  }
  if (std::getenv("HLOCACHE_RECORD_CORPUS_KEYS") != nullptr) {
    std::ofstream(HLOCACHE_CORPUS_KEYS) << now.str();
    GTEST_SKIP() << "recorded " << files.size() << " modules in " << HLOCACHE_CORPUS_KEYS;
  }
  std::map<std::string, std::string> recorded;
  std::ifstream in(HLOCACHE_CORPUS_KEYS);
  ASSERT_TRUE(in) << "cannot read " << HLOCACHE_CORPUS_KEYS;
  for (std::string line; std::getline(in, line);) {
    recorded[line.substr(0, line.find('\t'))] = line;
  }
  // Modules added to the corpus after the record have nothing to compare with; every recorded
  // module that is here must match.
  size_t compared = 0;
  std::istringstream lines(now.str());
  for (std::string line; std::getline(lines, line);) {
    auto it = recorded.find(line.substr(0, line.find('\t')));
    if (it == recorded.end()) continue;
    ++compared;
    EXPECT_EQ(line, it->second) << "canonical text hash or key changed";
  }
  EXPECT_GE(compared, 400u) << "too few recorded modules found in the corpus";
}

// A key hashed from the canonical text as it is printed (the default) is the key of the text
// held whole, through both paths a key is computed on: one thread, and (for the modules large
// enough to be given a second thread) the parser followed by the builder on a second.
TEST(CorpusTest, StreamedKeysAreTheKeysOfTheHeldText) {
  std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  keying::KeySettings streamed;
  streamed.target = "cpu-x86-64-v3";
  streamed.allow_elided_constants = true;
  keying::KeySettings held = streamed;
  held.keep_canonical_text = true;
  for (const std::string& f : files) {
    auto text = hlo::ReadModuleFile(f);
    ASSERT_THAT(text, IsOk()) << f;
    auto module = hlo::ParseModule(*text, f);
    ASSERT_THAT(module, IsOk()) << f;
    auto whole = keying::KeyModule(*module, held);
    ASSERT_THAT(whole, IsOk()) << f;
    ASSERT_FALSE(whole->canonical.text.empty()) << f;
    auto one_thread = keying::KeyModule(*module, streamed);
    ASSERT_THAT(one_thread, IsOk()) << f;
    EXPECT_EQ(one_thread->canonical.text, "") << f;
    EXPECT_EQ(one_thread->key.text, whole->key.text) << f;
    EXPECT_EQ(one_thread->key.graph, whole->key.graph) << f;
    auto key_only = keying::KeyText(*text, f, streamed);
    ASSERT_THAT(key_only, IsOk()) << f;
    EXPECT_EQ(key_only->key.text, whole->key.text) << f;
    auto pipelined = keying::ParseAndKey(std::move(*text), f, streamed);
    ASSERT_THAT(pipelined, IsOk()) << f;
    EXPECT_EQ(pipelined->keyed.key.text, whole->key.text) << f;
  }
}

// Keying from text reports a parse error before invalid settings, as KeyModule after ParseModule
// would, through both calls that key a text, on a module large enough to take two threads.
TEST(CorpusTest, KeyingTextReportsParseErrorsBeforeInvalidSettings) {
  std::vector<std::string> files = test_support::CorpusFiles({"hlo"});
  ASSERT_FALSE(files.empty());
  const std::string largest =
      *std::max_element(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
        return fs::file_size(a) < fs::file_size(b);
      });
  auto text = hlo::ReadModuleFile(largest);
  ASSERT_THAT(text, IsOk());
  ASSERT_GT(text->size(), hlo::kDefaultTwoThreadBytes);
  // An instruction whose operand is never defined, before the last computation's root.
  std::string broken = *text;
  const size_t root = broken.rfind("  ROOT ");
  ASSERT_NE(root, std::string::npos);
  broken.insert(root, "  broken.0 = f32[] negate(never_defined)\n");
  keying::KeySettings bad;
  bad.target = "cpu x86";
  EXPECT_THAT(keying::KeyText(broken, "m.hlo", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("undefined operand")));
  EXPECT_THAT(keying::ParseAndKey(broken, "m.hlo", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("undefined operand")));
  EXPECT_THAT(keying::KeyText(*text, "m.hlo", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cpu x86")));
  EXPECT_THAT(keying::ParseAndKey(*text, "m.hlo", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cpu x86")));
}

TEST(CorpusTest, InvalidModulesAreRejectedWithALocation) {
  std::vector<std::string> files = test_support::CorpusFiles({"invalid"});
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    auto module = hlo::ParseModuleFile(f);
    ASSERT_FALSE(module.has_value()) << f;
    // FILE:LINE:COL: error: ...
    EXPECT_THAT(module.error().message(),
                ::testing::MatchesRegex(".*\\.hlo:[0-9]+:[0-9]+: error: .*"));
  }
}

TEST(CorpusTest, UndefinedOperandCaseNamesTheOperand) {
  auto module =
      hlo::ParseModuleFile(std::string(HLOCACHE_CORPUS_DIR) + "/invalid/undefined_operand.hlo");
  ASSERT_FALSE(module.has_value());
  EXPECT_THAT(module.error().message(),
              HasSubstr("undefined_operand.hlo:4:174: error: undefined operand '%all-reduce.307'"));
}

}  // namespace
}  // namespace hlocache
