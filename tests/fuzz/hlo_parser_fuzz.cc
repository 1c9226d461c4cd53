// libFuzzer target: any bytes through the parser and, when they parse, the canonicalizer and a
// second round trip of the canonical text. Crashes, hangs, sanitizer reports, a canonical text
// that does not reparse to itself, and a text streamed to a sink (as keys are made) that is not
// the text held whole or not as long as the sink was told are all findings; the text is streamed
// three times: the second time with every computation's lines printed ahead, as a builder
// following the parser prints them, the third with the last computation's lines shared out in
// runs (canonical_builder.h: PrintSharedFromBack). One input in four also goes through the
// two-thread paths keys are computed with, which must give what one thread gives: the lexer in two
// halves (the same tokens, groups and error; the first module's too), ParseAndCanonicalize and
// CanonicalizeText (the same text or error, and streamed with the last computation's lines printed
// by both threads). One in four, since the threads started per input slow the run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/canonical.h"
#include "compiler/hlo/canonical_builder.h"
#include "compiler/hlo/canonical_pipeline.h"
#include "compiler/hlo/lexer.h"
#include "compiler/hlo/parser.h"

namespace {

using namespace hlocache::hlo;

// The two-thread paths give what ParseModule then Canonicalize gave: `expected` is the text or
// the error message. CanonicalizeText frees the module's instructions on the second thread
// while it prints.
void CheckTwoThreads(const uint8_t* data, size_t size, const std::string& expected) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseAndCanonicalize(text, "fuzz.hlo", {.allow_elided_constants = true},
                                     /*two_thread_bytes=*/0);
  const std::string got = parsed ? parsed->canonical.text : parsed.error().message();
  if (got != expected) std::abort();
  auto canonical = CanonicalizeText(text, "fuzz.hlo", {.allow_elided_constants = true},
                                    /*two_thread_bytes=*/0);
  if ((canonical ? canonical->text : canonical.error().message()) != expected) std::abort();
  // Streamed, the last computation's lines (when the builder finishes it after the parse) are
  // printed by both threads, in runs of one line.
  struct Kept final : CanonicalTextSink {
    void Begin(uint64_t bytes) override { told = bytes; }
    void Append(std::string_view piece) override { text.append(piece); }
    uint64_t told = 0;
    std::string text;
  };
  Kept kept;
  auto streamed = CanonicalizeText(text, "fuzz.hlo",
                                   {.allow_elided_constants = true,
                                    .text_sink = &kept,
                                    .shared_print_lines = 1,
                                    .shared_run_lines = 1},
                                   /*two_thread_bytes=*/0);
  if (streamed && (kept.told != kept.text.size() || kept.text != expected)) std::abort();
  if (!streamed && streamed.error().message() != expected) std::abort();
}

// What a sink is given (and told first, the length) is the text Canonicalize holds whole, the
// lines printed when the module is whole or ahead, each computation's as it is finished.
void CheckStreamed(const Module& module, const std::string& expected) {
  struct Sink final : CanonicalTextSink {
    void Begin(uint64_t bytes) override {
      ++begins;
      told = bytes;
    }
    void Append(std::string_view piece) override { text.append(piece); }
    int begins = 0;
    uint64_t told = 0;
    std::string text;
  };
  const auto check = [&](const Sink& sink, bool ok) {
    if (!ok || sink.begins != 1 || sink.told != expected.size() || sink.text != expected) {
      std::abort();
    }
  };
  Sink sink;
  check(sink,
        Canonicalize(module, {.allow_elided_constants = true, .text_sink = &sink}).has_value());
  Sink ahead;
  CanonicalBuilder builder(module, {.allow_elided_constants = true, .text_sink = &ahead});
  for (const Computation& comp : module.computations) {
    builder.StartComputation();
    builder.AddInstructions(comp.instructions.data(), 0,
                            static_cast<uint32_t>(comp.instructions.size()));
    builder.FinishComputation(comp.root, comp.execution_thread, /*print_ahead=*/true);
  }
  check(ahead, builder.Finish(module).has_value());
  // The last computation's lines shared out in runs of one line, the back taking every run
  // before Finish starts (on one thread: the threaded meeting is CheckTwoThreads').
  Sink shared;
  CanonicalBuilder sharing(module, {.allow_elided_constants = true,
                                    .text_sink = &shared,
                                    .shared_print_lines = 1,
                                    .shared_run_lines = 1});
  for (size_t c = 0; c < module.computations.size(); ++c) {
    const Computation& comp = module.computations[c];
    sharing.StartComputation();
    sharing.AddInstructions(comp.instructions.data(), 0,
                            static_cast<uint32_t>(comp.instructions.size()));
    const bool last = c + 1 == module.computations.size();
    if (sharing.FinishComputation(comp.root, comp.execution_thread, false, last) != last) {
      std::abort();
    }
  }
  sharing.PrintSharedFromBack();
  check(shared, sharing.Finish(module).has_value());
}

// Two lexings give the same tokens, groups and error.
void CheckLexedAlike(const hlocache::Result<std::vector<Token>>& one,
                     const std::vector<TopLevelGroup>& one_groups,
                     const hlocache::Result<std::vector<Token>>& two,
                     const std::vector<TopLevelGroup>& two_groups) {
  if (one.has_value() != two.has_value()) std::abort();
  if (!one) {
    if (one.error().message() != two.error().message()) std::abort();
    return;
  }
  if (one->size() != two->size() || one_groups.size() != two_groups.size()) std::abort();
  for (size_t i = 0; i < one->size(); ++i) {
    const Token& a = (*one)[i];
    const Token& b = (*two)[i];
    if (a.kind != b.kind || a.offset != b.offset || a.length != b.length) std::abort();
  }
  for (size_t g = 0; g < one_groups.size(); ++g) {
    if (one_groups[g].open != two_groups[g].open ||
        one_groups[g].definitions != two_groups[g].definitions) {
      std::abort();
    }
  }
}

// One lexer taking each token the general way (without its loop for the common tokens) gives
// the tokens, groups and error of one lexer, and so does the lexer in two halves (when
// `two_threads`). The lexer that stops at the first module's end as it reaches it gives what
// lexing the text cut there gives.
void CheckLexers(const uint8_t* data, size_t size, bool two_threads) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  std::vector<TopLevelGroup> one_groups, alone_groups, two_groups;
  auto one = Lex(source, "fuzz.hlo", &one_groups, SIZE_MAX);
  auto alone = LexEachTokenAlone(source, "fuzz.hlo", &alone_groups);
  CheckLexedAlike(one, one_groups, alone, alone_groups);
  std::vector<TopLevelGroup> first_groups, first_one_groups, first_two_groups;
  auto first = Lex(FirstModuleText(source), "fuzz.hlo", &first_groups, SIZE_MAX);
  auto first_one = LexFirstModule(source, "fuzz.hlo", &first_one_groups, SIZE_MAX);
  CheckLexedAlike(first, first_groups, first_one, first_one_groups);
  if (!two_threads) return;
  auto two = Lex(source, "fuzz.hlo", &two_groups, /*two_thread_bytes=*/0);
  CheckLexedAlike(one, one_groups, two, two_groups);
  auto first_two = LexFirstModule(source, "fuzz.hlo", &first_two_groups, /*two_thread_bytes=*/0);
  CheckLexedAlike(first, first_groups, first_two, first_two_groups);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hlocache::hlo;
  const bool two_threads = size % 4 == 0;
  CheckLexers(data, size, two_threads);
  auto module = ParseModule(std::string(reinterpret_cast<const char*>(data), size), "fuzz.hlo");
  if (!module) {
    // Every error is one located line.
    if (module.error().message().find('\n') != std::string::npos) std::abort();
    if (two_threads) CheckTwoThreads(data, size, module.error().message());
    return 0;
  }
  auto canonical = Canonicalize(*module, {.allow_elided_constants = true});
  if (two_threads) {
    CheckTwoThreads(data, size, canonical ? canonical->text : canonical.error().message());
  }
  if (!canonical) return 0;
  CheckStreamed(*module, canonical->text);
  auto again = ParseModule(canonical->text, "canonical.hlo");
  if (!again) std::abort();  // The canonical text must be valid HLO.
  auto twice = Canonicalize(*again, {.allow_elided_constants = true});
  if (!twice || twice->text != canonical->text) std::abort();  // And a fixed point.
  return 0;
}
