#include "compiler/hlo/opcode.h"

#include <algorithm>
#include <array>
#include <utility>

namespace hlocache::hlo {
namespace {

constexpr std::string_view kNames[] = {
#define HLOCACHE_OPCODE_NAME(e, s) s,
    HLOCACHE_OPCODE_LIST(HLOCACHE_OPCODE_NAME)
#undef HLOCACHE_OPCODE_NAME
};
constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);

// Names sorted for binary search, built once.
const std::array<std::pair<std::string_view, Opcode>, kCount>& SortedNames() {
  static const auto sorted = [] {
    std::array<std::pair<std::string_view, Opcode>, kCount> v{};
    for (size_t i = 0; i < kCount; ++i) v[i] = {kNames[i], static_cast<Opcode>(i)};
    std::sort(v.begin(), v.end());
    return v;
  }();
  return sorted;
}

}  // namespace

std::string_view OpcodeName(Opcode op) {
  auto i = static_cast<size_t>(op);
  return i < kCount ? kNames[i] : std::string_view("<bad opcode>");
}

std::optional<Opcode> OpcodeFromName(std::string_view name) {
  const auto& sorted = SortedNames();
  auto it = std::lower_bound(sorted.begin(), sorted.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it == sorted.end() || it->first != name) return std::nullopt;
  return it->second;
}

std::optional<OpcodeSpelling> ParseOpcodeSpelling(std::string_view text) {
  if (auto op = OpcodeFromName(text)) return OpcodeSpelling{*op, AsyncPhase::kNone};
  constexpr std::pair<std::string_view, AsyncPhase> kSuffixes[] = {{"-start", AsyncPhase::kStart},
                                                                   {"-update", AsyncPhase::kUpdate},
                                                                   {"-done", AsyncPhase::kDone}};
  for (const auto& [suffix, phase] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      if (auto op = OpcodeFromName(text.substr(0, text.size() - suffix.size()))) {
        return OpcodeSpelling{*op, phase};
      }
    }
  }
  return std::nullopt;
}

}  // namespace hlocache::hlo
