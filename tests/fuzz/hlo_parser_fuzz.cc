// libFuzzer target: any bytes through the parser and, when they parse, the canonicalizer and a
// second round trip of the canonical text. Crashes, hangs, sanitizer reports and a canonical text
// that does not reparse to itself are all findings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/hlo/canonical.h"
#include "compiler/hlo/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hlocache::hlo;
  auto module = ParseModule(std::string(reinterpret_cast<const char*>(data), size), "fuzz.hlo");
  if (!module) {
    // Every error is one located line.
    if (module.error().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  auto canonical = Canonicalize(*module, {.allow_elided_constants = true});
  if (!canonical) return 0;
  auto again = ParseModule(canonical->text, "canonical.hlo");
  if (!again) std::abort();  // The canonical text must be valid HLO.
  auto twice = Canonicalize(*again, {.allow_elided_constants = true});
  if (!twice || twice->text != canonical->text) std::abort();  // And a fixed point.
  return 0;
}
