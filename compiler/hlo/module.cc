#include "compiler/hlo/module.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/lexer.h"

namespace hlocache::hlo {

namespace {
const Attribute* FindIn(std::span<const Attribute> attributes, std::string_view attr_name) {
  for (const Attribute& a : attributes) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}
}  // namespace

AttributeRole InstructionAttributeRole(std::string_view name) {
  if (IsDebugOnlyAttribute(name)) return AttributeRole::kDebugOnly;
  if (IsCalleeAttribute(name)) return AttributeRole::kCallee;
  if (name == "control-predecessors") return AttributeRole::kControlPredecessors;
  if (name == "channel_id") return AttributeRole::kChannelId;
  if (name == "frontend_attributes") return AttributeRole::kFrontendAttributes;
  if (name == "backend_config") return AttributeRole::kBackendConfig;
  return AttributeRole::kOther;
}

std::optional<AttributeRole> KnownInstructionAttributeRole(std::string_view name) {
  static const std::vector<AttributeRole> roles = [] {
    std::vector<AttributeRole> by_index;
    for (std::string_view known : InstructionAttributeNames()) {
      by_index.push_back(InstructionAttributeRole(known));
    }
    return by_index;
  }();
  const int index = InstructionAttributeIndex(name);
  if (index < 0) return std::nullopt;
  return roles[static_cast<size_t>(index)];
}

const Attribute* Instruction::FindAttribute(std::string_view attr_name) const {
  return FindIn(attributes, attr_name);
}

Module::Module(std::unique_ptr<std::string> source, std::string filename)
    : source_(std::move(source)), filename_(std::move(filename)) {}

const Attribute* Module::FindAttribute(std::string_view attr_name) const {
  return FindIn(attributes, attr_name);
}

bool Module::IsScheduled() const {
  const Attribute* a = FindAttribute("is_scheduled");
  return a && a->value.end == a->value.begin + 1 && TokenText(a->value.begin) == "true";
}

bool Module::HasElidedConstants() const {
  for (const Computation& c : computations) {
    for (const Instruction& i : c.instructions) {
      if (i.literal_elided) return true;
    }
  }
  return false;
}

uint32_t Module::LineOf(uint32_t offset) const {
  if (line_starts_.empty()) {
    line_starts_.push_back(0);
    std::string_view s = source();
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n') line_starts_.push_back(static_cast<uint32_t>(i + 1));
    }
  }
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  return static_cast<uint32_t>(it - line_starts_.begin());
}

Result<std::vector<int64_t>> Module::IntList(const Attribute& attr) const {
  std::vector<int64_t> out;
  uint32_t i = attr.value.begin;
  uint32_t end = attr.value.end;
  if (i < end && tokens[i].kind == TokenKind::kLBrace) {
    if (tokens[end - 1].kind != TokenKind::kRBrace) {
      return Error(ErrorAt(filename_, source(), attr.offset, "expected {integers}"));
    }
    ++i;
    --end;
  }
  for (; i < end; ++i) {
    if (tokens[i].kind == TokenKind::kComma) continue;
    std::string_view t = TokenText(i);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (tokens[i].kind != TokenKind::kInt || ec != std::errc() || p != t.data() + t.size()) {
      return Error(ErrorAt(filename_, source(), tokens[i].offset,
                           "expected an integer in '" + std::string(attr.name) + "'"));
    }
    out.push_back(v);
  }
  return out;
}

Result<int64_t> Module::Int(const Attribute& attr) const {
  auto list = IntList(attr);
  if (!list) return Error(list.error());
  if (list->size() != 1 || tokens[attr.value.begin].kind == TokenKind::kLBrace) {
    return Error(ErrorAt(filename_, source(), attr.offset,
                         "expected one integer in '" + std::string(attr.name) + "'"));
  }
  return (*list)[0];
}

Result<double> Module::Float(const Attribute& attr) const {
  std::string text;
  for (uint32_t t = attr.value.begin; t < attr.value.end; ++t) text += TokenText(t);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    return Error(ErrorAt(filename_, source(), attr.offset,
                         "expected a number in '" + std::string(attr.name) + "'"));
  }
  return v;
}

std::vector<int32_t> Module::CalleesOf(const Instruction& inst, std::string_view attr_name) const {
  // The parser appended one callee per name, attribute by attribute, in written order.
  size_t next = 0;
  for (const Attribute& a : inst.attributes) {
    if (!IsCalleeAttribute(a.name)) continue;
    size_t names = 0;
    for (uint32_t t = a.value.begin; t < a.value.end; ++t) {
      if (tokens[t].kind == TokenKind::kIdent) ++names;
    }
    if (a.name == attr_name) {
      if (next + names > inst.callees.size()) return {};
      return std::vector<int32_t>(inst.callees.begin() + static_cast<ptrdiff_t>(next),
                                  inst.callees.begin() + static_cast<ptrdiff_t>(next + names));
    }
    next += names;
  }
  return {};
}

}  // namespace hlocache::hlo
