// libFuzzer target: any bytes through the parser and, when they parse, the canonicalizer and a
// second round trip of the canonical text. Crashes, hangs, sanitizer reports and a canonical text
// that does not reparse to itself are all findings. One input in four also goes through
// ParseAndCanonicalize on two threads (what keys are computed with), which must give the same
// text or the same error: one in four, since a thread started per input slows the run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/hlo/canonical.h"
#include "compiler/hlo/canonical_pipeline.h"
#include "compiler/hlo/parser.h"

namespace {

using namespace hlocache::hlo;

// The two-thread path gives what ParseModule then Canonicalize gave: `expected` is the text or
// the error message.
void CheckTwoThreads(const uint8_t* data, size_t size, const std::string& expected) {
  auto parsed = ParseAndCanonicalize(std::string(reinterpret_cast<const char*>(data), size),
                                     "fuzz.hlo", {.allow_elided_constants = true},
                                     /*two_thread_bytes=*/0);
  const std::string got = parsed ? parsed->canonical.text : parsed.error().message();
  if (got != expected) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hlocache::hlo;
  const bool two_threads = size % 4 == 0;
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
  auto again = ParseModule(canonical->text, "canonical.hlo");
  if (!again) std::abort();  // The canonical text must be valid HLO.
  auto twice = Canonicalize(*again, {.allow_elided_constants = true});
  if (!twice || twice->text != canonical->text) std::abort();  // And a fixed point.
  return 0;
}
