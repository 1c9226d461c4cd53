#include "compiler/hlo/canonical_pipeline.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/helper_thread.h"
#include "compiler/hlo/lexer.h"
#include "compiler/hlo/parser.h"
#include "tests/unit/compiler/corpus_files.h"
#include "tests/unit/status_matchers.h"

#ifndef HLOCACHE_CORPUS_DIR
#define HLOCACHE_CORPUS_DIR "../shared/corpus"
#endif

namespace hlocache::hlo {
namespace {

using ::testing::HasSubstr;

// What ParseModule then Canonicalize give: the canonical text, or the error's message.
std::string OneThread(const std::string& text, const CanonicalOptions& options) {
  auto module = ParseModule(text, "t.hlo");
  if (!module) return "parse error: " + module.error().message();
  auto canonical = Canonicalize(*module, options);
  if (!canonical) return "canonical error: " + canonical.error().message();
  return canonical->text;
}

// The same from ParseAndCanonicalize on two threads, whatever the text's size.
std::string TwoThreads(const std::string& text, const CanonicalOptions& options) {
  // Parse errors and canonical errors are told apart by what comes with them: a parse error has
  // no module.
  auto parsed = ParseAndCanonicalize(text, "t.hlo", options, /*two_thread_bytes=*/0);
  if (!parsed) {
    return (ParseModule(text, "t.hlo") ? "canonical error: " : "parse error: ") +
           parsed.error().message();
  }
  return parsed->canonical.text;
}

TEST(CanonicalPipelineTest, GivesWhatOneThreadGivesOnEveryCorpusModule) {
  const std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla", "invalid"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  size_t parse_errors = 0, canonical_errors = 0;
  for (const std::string& file : files) {
    auto text = ReadModuleFile(file);
    ASSERT_THAT(text, IsOk());
    // Strict (elided constants refused: an error found by the second thread) and lenient.
    for (const bool allow_elided : {false, true}) {
      const CanonicalOptions options{.allow_elided_constants = allow_elided};
      const std::string expected = OneThread(*text, options);
      EXPECT_EQ(TwoThreads(*text, options), expected) << file;
      parse_errors += expected.starts_with("parse error: ");
      canonical_errors += expected.starts_with("canonical error: ");
    }
  }
  // Both kinds of error were among what was compared.
  EXPECT_GT(parse_errors, 0u);
  EXPECT_GT(canonical_errors, 0u);
}

// A sink that keeps the text it is given, and the length it was told first.
class KeptText final : public CanonicalTextSink {
 public:
  void Begin(uint64_t text_bytes) override { told_ = text_bytes; }
  void Append(std::string_view piece) override { text_.append(piece); }
  // The text, or a note when its length is not the one told.
  std::string Text() const {
    return told_ == text_.size() ? text_ : "told " + std::to_string(told_) + " bytes: " + text_;
  }

 private:
  uint64_t told_ = 0;
  std::string text_;
};

// The text and, when recorded, its lines' source lines, or the error's message.
std::string Described(const Result<CanonicalModule>& canonical, const std::string& text,
                      const KeptText* sink) {
  if (!canonical) {
    return (ParseModule(text, "t.hlo") ? "canonical error: " : "parse error: ") +
           canonical.error().message();
  }
  std::string out = sink != nullptr ? sink->Text() : canonical->text;
  for (const uint32_t line : canonical->source_lines) out += " " + std::to_string(line);
  return out;
}

// CanonicalizeText frees the module's instructions on a second thread while it prints: the same
// text (kept whole, or streamed to a sink), the same source lines and the same errors as one
// thread, on every corpus module.
TEST(CanonicalPipelineTest, CanonicalizeTextGivesWhatOneThreadGivesOnEveryCorpusModule) {
  const std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla", "invalid"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  size_t errors = 0, source_lines = 0;
  for (const std::string& file : files) {
    auto text = ReadModuleFile(file);
    ASSERT_THAT(text, IsOk());
    for (const bool allow_elided : {false, true}) {
      for (const bool record_source_lines : {false, true}) {
        const CanonicalOptions options{.allow_elided_constants = allow_elided,
                                       .record_source_lines = record_source_lines};
        auto module = ParseModule(*text, "t.hlo");
        auto canonical = module ? Canonicalize(*module, options) : Error(module.error());
        const std::string expected = Described(canonical, *text, nullptr);
        EXPECT_EQ(Described(CanonicalizeText(*text, "t.hlo", options, /*two_thread_bytes=*/0),
                            *text, nullptr),
                  expected)
            << file;
        errors += !canonical.has_value();
        source_lines += canonical.has_value() && !canonical->source_lines.empty();
        KeptText streamed;
        CanonicalOptions streaming = options;
        streaming.text_sink = &streamed;
        EXPECT_EQ(Described(CanonicalizeText(*text, "t.hlo", streaming, 0), *text, &streamed),
                  expected)
            << file << " (streamed)";
      }
    }
  }
  EXPECT_GT(errors, 0u);
  EXPECT_GT(source_lines, 0u);
}

// Ends the process, failing, unless Done() is called within a minute: for a test whose failure
// is a hang, which ctest would wait ten minutes for.
class Watchdog {
 public:
  explicit Watchdog(std::string what)
      : thread_([this, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::minutes(1), [this] { return done_; })) {
            std::fprintf(stderr, "hung for a minute: %s\n", what.c_str());
            std::_Exit(1);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A parse that fails before the header has ended (in the lexer, or in a module attribute) never
// starts the builder's thread: the pipeline must not wait for one (it once spun for it forever;
// found by the parser's fuzz target).
TEST(CanonicalPipelineTest, AParseThatFailsBeforeTheHeaderEndsWithItsError) {
  const std::vector<std::string> texts = {
      std::string("HloModule m\n\x01\n"),
      "HloModule m, entry_computation_layout={(f32[2]}\n\nENTRY e {\n  ROOT p = f32[2] "
      "parameter(0)\n}\n",
      "HloModule m, no_such_attribute=1\n",
  };
  for (const std::string& text : texts) {
    auto module = ParseModule(text, "t.hlo");
    ASSERT_FALSE(module.has_value()) << text;
    Watchdog watchdog(text);
    auto parsed = ParseAndCanonicalize(text, "t.hlo", {}, /*two_thread_bytes=*/0);
    ASSERT_FALSE(parsed.has_value()) << text;
    EXPECT_EQ(parsed.error().message(), module.error().message());
    auto canonical = CanonicalizeText(text, "t.hlo", {}, /*two_thread_bytes=*/0);
    ASSERT_FALSE(canonical.has_value()) << text;
    EXPECT_EQ(canonical.error().message(), module.error().message());
  }
}

// A computation of `n` instructions, each with a nested anonymous operand: the parser sizes the
// instruction array by the named instructions, so the nested ones overflow it and it moves to
// a larger one several times while the second thread reads it.
std::string NestedOperands(int n, const std::string& last_operand = "%v0") {
  std::string text = "HloModule m\n\nENTRY %e (p: f32[8]) -> f32[8] {\n";
  text += "  %v0 = f32[8] parameter(0)\n";
  for (int i = 1; i < n; ++i) {
    const std::string prev = "%v" + std::to_string(i - 1);
    text += "  %v" + std::to_string(i) + " = f32[8] add(f32[8] multiply(" + prev + ", " + prev +
            "), " + (i + 1 == n ? last_operand : prev) + ")\n";
  }
  text += "}\n";
  return text;
}

// The lines of the computation the builder finishes last, printed by both threads at once (the
// builder's from the back, while the parser's thread frees the instructions and then prints
// from the front): the text, and the errors, one thread gives, on every corpus module, in runs
// of one line and of a few, through CanonicalizeText and ParseAndCanonicalize.
TEST(CanonicalPipelineTest, SharedLinesGiveWhatOneThreadGivesOnEveryCorpusModule) {
  const std::vector<std::string> files = test_support::CorpusFiles({"hlo", "torch_xla", "invalid"});
  ASSERT_GE(files.size(), 400u) << "corpus not found at " << HLOCACHE_CORPUS_DIR;
  for (const std::string& file : files) {
    Watchdog watchdog("shared lines of " + file);  // A thread that waits forever hangs here.
    auto text = ReadModuleFile(file);
    ASSERT_THAT(text, IsOk());
    for (const bool allow_elided : {false, true}) {
      auto module = ParseModule(*text, "t.hlo");
      auto canonical = module ? Canonicalize(*module, {.allow_elided_constants = allow_elided})
                              : Error(module.error());
      const std::string expected = Described(canonical, *text, nullptr);
      for (const size_t run_lines : {size_t{1}, size_t{3}}) {
        KeptText streamed;
        const CanonicalOptions options{.allow_elided_constants = allow_elided,
                                       .text_sink = &streamed,
                                       .shared_print_lines = 1,
                                       .shared_run_lines = run_lines};
        EXPECT_EQ(Described(CanonicalizeText(*text, "t.hlo", options, 0), *text, &streamed),
                  expected)
            << file << ", runs of " << run_lines;
        KeptText kept;
        CanonicalOptions keeping = options;
        keeping.text_sink = &kept;
        auto parsed = ParseAndCanonicalize(*text, "t.hlo", keeping, 0);
        EXPECT_EQ(parsed ? kept.Text() : Described(Error(parsed.error()), *text, nullptr), expected)
            << file << ", runs of " << run_lines << " (module kept)";
      }
    }
  }
}

TEST(CanonicalPipelineTest, InstructionArraysThatMoveWhileBeingReadGiveTheSameText) {
  const std::string text = NestedOperands(5000);
  const std::string expected = OneThread(text, {});
  ASSERT_THAT(expected, HasSubstr("multiply"));
  ASSERT_FALSE(expected.starts_with("parse error"));
  for (int round = 0; round < 5; ++round) EXPECT_EQ(TwoThreads(text, {}), expected);
}

TEST(CanonicalPipelineTest, AnErrorLateInALargeComputationIsTheParsersError) {
  // The second thread has built thousands of instructions of the computation by then; the
  // computation's array is freed as the parser returns.
  const std::string text = NestedOperands(5000, "%undefined");
  const std::string expected = OneThread(text, {});
  ASSERT_THAT(expected, HasSubstr("undefined operand '%undefined'"));
  for (int round = 0; round < 5; ++round) EXPECT_EQ(TwoThreads(text, {}), expected);
}

// `count` small computations, a large one (handed over in batches while it is parsed), as many
// small ones again, and an entry that calls them all in a chain; `bad` replaces the operand of
// the last small computation's root. The parser hands a busy builder the small computations it
// leaves whole a batch at a time, and one that waits for work each at once.
std::string ManyComputations(int count, const std::string& bad = "%p") {
  std::string text = "HloModule m\n\n";
  const auto small = [&](int i, const std::string& operand) {
    text += "%c" + std::to_string(i) + " (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n";
    text += "  %q = f32[] multiply(%p, %p)\n  ROOT %r = f32[] add(%q, " + operand + ")\n}\n\n";
  };
  for (int i = 0; i < count; ++i) small(i, "%p");
  text += "%big (p: f32[]) -> f32[] {\n  %b0 = f32[] parameter(0)\n";
  for (int i = 1; i < 1000; ++i) {
    text += "  %b" + std::to_string(i) + " = f32[] add(%b" + std::to_string(i - 1) + ", %b0)\n";
  }
  text += "}\n\n";
  for (int i = count; i < 2 * count; ++i) small(i, i + 1 == 2 * count ? bad : "%p");
  text += "ENTRY %e (p: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n";
  text += "  %y = f32[] call(%x), to_apply=%big\n";
  for (int i = 0; i < 2 * count; ++i) {
    text += "  %y" + std::to_string(i) + " = f32[] call(" +
            (i == 0 ? std::string("%y") : "%y" + std::to_string(i - 1)) + "), to_apply=%c" +
            std::to_string(i) + "\n";
  }
  text += "}\n";
  return text;
}

TEST(CanonicalPipelineTest, ManySmallComputationsHandedOverInBatchesGiveTheSameText) {
  const std::string text = ManyComputations(2000);
  const std::string expected = OneThread(text, {});
  ASSERT_THAT(expected, HasSubstr("to_apply=c3999"));
  for (int round = 0; round < 5; ++round) EXPECT_EQ(TwoThreads(text, {}), expected);
}

TEST(CanonicalPipelineTest, AnErrorAfterManySmallComputationsIsTheParsersError) {
  // Computations left whole before it may not have been handed over yet.
  const std::string text = ManyComputations(2000, "%undefined");
  const std::string expected = OneThread(text, {});
  ASSERT_THAT(expected, HasSubstr("undefined operand '%undefined'"));
  for (int round = 0; round < 5; ++round) EXPECT_EQ(TwoThreads(text, {}), expected);
}

// Where no thread can be started (here: every new thread asks for a 16 TiB stack), the lexer
// and the builder do their work on the calling thread, with the same results; nothing throws.
TEST(CanonicalPipelineTest, WithoutThreadsToBeHadTheWorkIsDoneOnTheCallingThread) {
  const std::string text = NestedOperands(3000) + std::string(size_t{1} << 20, '\n');
  const std::string expected = OneThread(text, {});
  ASSERT_THAT(expected, HasSubstr("multiply"));
  EXPECT_EXIT(
      {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, size_t{1} << 44);
        pthread_setattr_default_np(&attr);
        HelperThread probe;
        const bool no_threads = !probe.Try([] {});
        auto lexed = Lex(text, "t.hlo", nullptr, /*two_thread_bytes=*/0);
        const bool same = lexed.has_value() && TwoThreads(text, {}) == expected;
        ::_exit(no_threads && same ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Records the listener's calls, to check the order parser.h promises.
class RecordingListener final : public ParseListener {
 public:
  void HeaderParsed(const Module& module) override {
    calls += "H";
    header_attributes = module.attributes.size();
  }
  void InstructionAdded(const Computation& comp) override {
    ++instructions;
    sizes_seen_ok &= comp.instructions.size() <= comp.instructions.capacity();
  }
  void InstructionsWillMove(const Computation& comp) override {
    ++moves;
    // Called only when the next append must move the array.
    full_when_moved &= comp.instructions.size() == comp.instructions.capacity();
  }
  void ComputationLeft(const Computation& comp, bool parsed) override {
    calls += parsed ? "C" : "X";
    last_left_size = comp.instructions.size();
  }
  void ParseEnded(bool parsed) override { calls += parsed ? "E" : "F"; }

  std::string calls;
  size_t header_attributes = 0;
  size_t instructions = 0;
  size_t moves = 0;
  size_t last_left_size = 0;
  bool sizes_seen_ok = true;
  bool full_when_moved = true;
};

TEST(ParseListenerTest, HearsTheHeaderEachComputationAndTheEndInOrder) {
  RecordingListener listener;
  auto module = ParseModule(NestedOperands(300), "t.hlo", &listener);
  ASSERT_THAT(module, IsOk());
  EXPECT_EQ(listener.calls, "HCE");
  EXPECT_EQ(listener.instructions, module->computations[0].instructions.size());
  EXPECT_EQ(listener.last_left_size, module->computations[0].instructions.size());
  EXPECT_GT(listener.moves, 0u);  // The nested operands overflowed the array.
  EXPECT_TRUE(listener.full_when_moved);
  EXPECT_TRUE(listener.sizes_seen_ok);
}

TEST(ParseListenerTest, HearsAComputationLeftUnparsedAndTheEndOnAnError) {
  RecordingListener listener;
  const std::string text =
      "HloModule m, replica_count=2\n\n%c (a: f32[]) -> f32[] {\n  ROOT %a = f32[] parameter(0)\n"
      "}\n\nENTRY %e () -> f32[] {\n  %x = f32[] constant(1)\n  ROOT %y = f32[] negate(%z)\n}\n";
  auto module = ParseModule(text, "t.hlo", &listener);
  ASSERT_FALSE(module.has_value());
  EXPECT_THAT(module.error().message(), HasSubstr("t.hlo:9:"));
  EXPECT_EQ(listener.calls, "HCXF");
  EXPECT_EQ(listener.header_attributes, 1u);
  EXPECT_EQ(listener.last_left_size, 1u);  // %x was appended before %y failed.
}

TEST(ParseListenerTest, HearsOnlyTheEndWhenTheTextDoesNotLex) {
  RecordingListener listener;
  auto module = ParseModule("HloModule m\n\"unterminated", "t.hlo", &listener);
  ASSERT_FALSE(module.has_value());
  EXPECT_EQ(listener.calls, "F");
}

}  // namespace
}  // namespace hlocache::hlo
