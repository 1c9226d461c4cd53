#include "compiler/hlo/opcode.h"

#include <utility>

#include "compiler/hlo/word_table.h"

namespace hlocache::hlo {
namespace {

constexpr std::string_view kNames[] = {
#define HLOCACHE_OPCODE_NAME(e, s) s,
    HLOCACHE_OPCODE_LIST(HLOCACHE_OPCODE_NAME)
#undef HLOCACHE_OPCODE_NAME
};
constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);

}  // namespace

std::string_view OpcodeName(Opcode op) {
  auto i = static_cast<size_t>(op);
  return i < kCount ? kNames[i] : std::string_view("<bad opcode>");
}

std::optional<Opcode> OpcodeFromName(std::string_view name) {
  static const WordTable table(kNames);
  const int32_t i = table.Find(name);
  if (i < 0) return std::nullopt;
  return static_cast<Opcode>(i);
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

bool IsHostTransfer(Opcode op) {
  switch (op) {
    case Opcode::kInfeed:
    case Opcode::kOutfeed:
    case Opcode::kSend:
    case Opcode::kSendDone:
    case Opcode::kRecv:
    case Opcode::kRecvDone:
      return true;
    default:
      return false;
  }
}

bool HasEffects(Opcode op) {
  return op == Opcode::kCustomCall || op == Opcode::kRngGetAndUpdateState || IsHostTransfer(op);
}

}  // namespace hlocache::hlo
