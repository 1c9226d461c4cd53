// The cache key's invariances and sensitivities, proven on the real modules of the shared corpus.
//
// Every mutation is generated from each corpus module (tests/unit/compiler/mutations.h). An
// invariance mutation (renaming, metadata, spacing, default layouts, number spelling, legal
// reordering, attribute order) must leave the key as it was; a sensitivity mutation (a constant,
// a dimension, a comparison, operand order, an attribute value, a sharding, an opcode) must change
// it. Every mutated module must still parse: if one does not, the generator is wrong, and the
// parse error says where.
//
// Mutated texts that fail are written under $TMPDIR/hlocache_mutations/<mutation>/ next to the
// original, so that `hlocache why ORIGINAL MUTATED` shows the differing line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/parser.h"
#include "keying/keying.h"
#include "tests/unit/compiler/corpus_files.h"
#include "tests/unit/compiler/mutations.h"

#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "/work/shared/corpus"
#endif

namespace hlocache {
namespace {

namespace fs = std::filesystem;

struct CorpusModule {
  std::string path;
  hlo::Module module;
  std::string canonical;
  std::string key;
};

keying::KeySettings Settings() {
  keying::KeySettings settings;
  settings.target = "cpu-x86-64-v3";  // Fixed, so that no host detection enters the test.
  settings.allow_elided_constants = true;
  settings.keep_canonical_text = true;  // Compared with the original's.
  return settings;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Where two canonical texts first differ: the line, and both versions from a little before the
// first differing byte (long lines would hide it).
std::string FirstDifference(std::string_view a, std::string_view b) {
  const size_t at = std::ranges::mismatch(a, b).in1 - a.begin();
  if (at == a.size() && at == b.size()) return "texts are equal";
  const size_t line_start = a.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t from =
      std::max(line_start == std::string_view::npos ? 0 : line_start + 1, at < 60 ? 0 : at - 60);
  auto excerpt = [&](std::string_view s) {
    std::string_view e = s.substr(std::min(from, s.size()), 160);
    return std::string(e.substr(0, e.find('\n')));
  };
  const size_t line = std::count(a.begin(), a.begin() + at, '\n') + 1;
  return "canonical line " + std::to_string(line) + " was `..." + excerpt(a) + "`, now `..." +
         excerpt(b) + "`";
}

// Writes the original and the mutated module where `hlocache why` can compare them.
std::string Dump(std::string_view mutation, const CorpusModule& original,
                 const std::string& mutated) {
  const fs::path dir = fs::temp_directory_path() / "hlocache_mutations" / mutation;
  fs::create_directories(dir);
  const std::string stem = fs::path(original.path).stem().string();
  std::ofstream(dir / (stem + ".orig.hlo"), std::ios::binary) << original.module.source();
  const fs::path out = dir / (stem + ".mutated.hlo");
  std::ofstream(out, std::ios::binary) << mutated;
  return out.string();
}

enum class KeyMust { kStayTheSame, kChange };

struct MutationReport {
  int applied = 0;                    // Modules the mutation changed.
  std::vector<std::string> failures;  // One line per module where the key misbehaved.
};

using Generator = std::function<mutation::Mutated(const hlo::Module&)>;

struct Corpus {
  std::vector<CorpusModule> modules;
  std::vector<std::string> load_errors;
};

// Parsed and keyed once for all tests: parsing the corpus is most of a mutation's cost.
const Corpus& LoadedCorpus() {
  static const Corpus* corpus = [] {
    auto* c = new Corpus();
    for (const fs::path path : test_support::CorpusFiles({"hlo", "torch_xla"})) {
      // Multi-module files key as their first module; mutate just that.
      std::string text(hlo::FirstModuleText(ReadFile(path)));
      auto module = hlo::ParseModule(std::move(text), path.string());
      if (!module) {
        c->load_errors.push_back(module.error().message());
        continue;
      }
      auto keyed = keying::KeyModule(*module, Settings());
      if (!keyed) {
        c->load_errors.push_back(path.string() + ": " + keyed.error().message());
        continue;
      }
      c->modules.push_back({path.string(), std::move(*module), std::move(keyed->canonical.text),
                            std::move(keyed->key.text)});
    }
    return c;
  }();
  return *corpus;
}

// Applies `generate` to every corpus module and checks each mutated module's key.
MutationReport RunMutation(std::string_view name, const Generator& generate, KeyMust must) {
  MutationReport report;
  for (const CorpusModule& original : LoadedCorpus().modules) {
    mutation::Mutated text = generate(original.module);
    if (!text) continue;
    ++report.applied;
    auto parsed = hlo::ParseModule(*text, original.path + " [" + std::string(name) + "]");
    if (!parsed) {
      report.failures.push_back(
          "mutated module does not parse (generator bug): " + parsed.error().message() +
          " (dumped to " + Dump(name, original, *text) + ")");
      continue;
    }
    auto keyed = keying::KeyModule(*parsed, Settings());
    if (!keyed) {
      report.failures.push_back(original.path + ": does not key: " + keyed.error().message());
      continue;
    }
    const bool same = keyed->key.text == original.key;
    if (same != (must == KeyMust::kStayTheSame)) {
      report.failures.push_back(
          original.path + ": " +
          (same ? std::string("same key")
                : "key changed, " + FirstDifference(original.canonical, keyed->canonical.text)) +
          " (dumped to " + Dump(name, original, *text) + ")");
    }
  }
  std::printf("[ mutation ] %-28s applied to %4d modules, %zu failures\n",
              std::string(name).c_str(), report.applied, report.failures.size());
  return report;
}

// The mutation must have been applied to at least `min_applied` modules (so that it tests
// something) and must have behaved on every one.
void ExpectAllBehaved(std::string_view name, const MutationReport& report, int min_applied) {
  EXPECT_GE(report.applied, min_applied) << name << " found too few sites in the corpus";
  std::string listed;
  for (size_t i = 0; i < report.failures.size() && i < 15; ++i) {
    listed += "\n  " + report.failures[i];
  }
  EXPECT_TRUE(report.failures.empty()) << name << ": " << report.failures.size() << " of "
                                       << report.applied << " modules misbehaved:" << listed;
}

void ExpectKeyStays(std::string_view name, const Generator& generate, int min_applied) {
  ExpectAllBehaved(name, RunMutation(name, generate, KeyMust::kStayTheSame), min_applied);
}
void ExpectKeyChanges(std::string_view name, const Generator& generate, int min_applied) {
  ExpectAllBehaved(name, RunMutation(name, generate, KeyMust::kChange), min_applied);
}

TEST(CorpusMutationTest, CorpusLoads) {
  const Corpus& corpus = LoadedCorpus();
  EXPECT_GE(corpus.modules.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  EXPECT_TRUE(corpus.load_errors.empty()) << corpus.load_errors.front();
}

// canon(canon(x)) == canon(x), byte for byte, and so the key.
TEST(CorpusMutationTest, CanonicalTextIsIdempotent) {
  int checked = 0;
  for (const CorpusModule& original : LoadedCorpus().modules) {
    auto again = hlo::ParseModule(original.canonical, original.path + " [canonical]");
    ASSERT_TRUE(again.has_value()) << again.error().message();
    auto keyed = keying::KeyModule(*again, Settings());
    ASSERT_TRUE(keyed.has_value()) << original.path << ": " << keyed.error().message();
    EXPECT_EQ(keyed->canonical.text, original.canonical)
        << original.path << ": " << FirstDifference(original.canonical, keyed->canonical.text);
    EXPECT_EQ(keyed->key.text, original.key) << original.path;
    ++checked;
  }
  EXPECT_GE(checked, 400);
}

// ---- Invariances ----

TEST(CorpusMutationTest, RenamingEverythingKeepsTheKey) {
  ExpectKeyStays(
      "rename",
      [](const hlo::Module& m) { return mutation::RenameEverything(m, /*toggle_percent=*/false); },
      400);
  ExpectKeyStays(
      "rename-toggle-percent",
      [](const hlo::Module& m) { return mutation::RenameEverything(m, /*toggle_percent=*/true); },
      400);
}

TEST(CorpusMutationTest, MetadataDoesNotMatter) {
  ExpectKeyStays("strip-metadata", mutation::StripMetadata, 40);
  ExpectKeyStays("add-metadata", mutation::AddMetadata, 400);
}

TEST(CorpusMutationTest, CommentsAndWhitespaceDoNotMatter) {
  ExpectKeyStays("whitespace-comments", mutation::ReformatWhitespaceAndComments, 400);
}

TEST(CorpusMutationTest, DefaultLayoutsDoNotMatter) {
  ExpectKeyStays(
      "drop-default-layouts",
      [](const hlo::Module& m) {
        return mutation::DropDefaultLayouts(m, mutation::LayoutPlace::kOutsideAttributeValues);
      },
      200);
  ExpectKeyStays("add-default-layouts", mutation::AddDefaultLayouts, 250);
}

// Shapes inside attribute values (operand_layout_constraints, outfeed_shape) are shapes too:
// XLA reads `f32[2,2]` there with the default layout, as everywhere else.
TEST(CorpusMutationTest, DefaultLayoutsInsideAttributeValuesDoNotMatter) {
  ExpectKeyStays(
      "drop-default-layouts-in-attrs",
      [](const hlo::Module& m) {
        return mutation::DropDefaultLayouts(m, mutation::LayoutPlace::kInAttributeValues);
      },
      15);
}

TEST(CorpusMutationTest, NumericSpellingOfFloatConstantsDoesNotMatter) {
  ExpectKeyStays("respell-float-constants", mutation::RespellFloatConstants, 60);
}

TEST(CorpusMutationTest, LegalReorderingDoesNotMatter) {
  ExpectKeyStays("move-parameters-first", mutation::MoveParametersFirst, 180);
  ExpectKeyStays("swap-independent-neighbours", mutation::SwapIndependentNeighbours, 220);
  ExpectKeyStays("reorder-computations", mutation::ReorderComputations, 45);
}

TEST(CorpusMutationTest, AttributeOrderDoesNotMatter) {
  ExpectKeyStays("reverse-attribute-order", mutation::ReverseAttributeOrder, 200);
}

// Every invariance at once, one after another on the result of the previous one: each must keep
// working on text the others have already rewritten.
mutation::Mutated AllInvariancesInSequence(const hlo::Module& m) {
  const std::vector<Generator> steps = {
      mutation::StripMetadata,
      mutation::AddMetadata,
      mutation::ReverseAttributeOrder,
      mutation::SwapIndependentNeighbours,
      mutation::MoveParametersFirst,
      mutation::ReorderComputations,
      [](const hlo::Module& x) {
        return mutation::DropDefaultLayouts(x, mutation::LayoutPlace::kOutsideAttributeValues);
      },
      mutation::RespellFloatConstants,
      [](const hlo::Module& x) { return mutation::RenameEverything(x, /*toggle_percent=*/true); },
      mutation::ReformatWhitespaceAndComments,
  };
  std::string text(m.source());
  bool changed = false;
  for (const Generator& step : steps) {
    auto current = hlo::ParseModule(text, m.filename() + " [all-invariances]");
    if (!current) return text;  // The caller reports the parse error of this intermediate text.
    if (mutation::Mutated next = step(*current)) {
      text = std::move(*next);
      changed = true;
    }
  }
  return changed ? mutation::Mutated(std::move(text)) : std::nullopt;
}

TEST(CorpusMutationTest, AllInvariancesTogetherKeepTheKey) {
  ExpectKeyStays("all-invariances", AllInvariancesInSequence, 400);
}

// ---- Sensitivities ----

TEST(CorpusMutationTest, ConstantValueChangesTheKey) {
  ExpectKeyChanges("change-constant-value", mutation::ChangeConstantValue, 90);
}

TEST(CorpusMutationTest, DimensionChangesTheKey) {
  ExpectKeyChanges("change-dimension", mutation::ChangeDimension, 380);
}

TEST(CorpusMutationTest, ComparisonDirectionChangesTheKey) {
  ExpectKeyChanges("flip-comparison-direction", mutation::FlipComparisonDirection, 45);
}

TEST(CorpusMutationTest, OperandOrderChangesTheKey) {
  ExpectKeyChanges("swap-operands", mutation::SwapOperands, 200);
}

TEST(CorpusMutationTest, AttributeValueChangesTheKey) {
  ExpectKeyChanges("change-attribute-value", mutation::ChangeAttributeValue, 160);
}

TEST(CorpusMutationTest, ShardingChangesTheKey) {
  ExpectKeyChanges("change-sharding", mutation::ChangeSharding, 25);
}

TEST(CorpusMutationTest, OpcodeChangesTheKey) {
  ExpectKeyChanges("change-opcode", mutation::ChangeOpcode, 150);
}

}  // namespace
}  // namespace hlocache
