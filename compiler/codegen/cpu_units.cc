#include "compiler/codegen/cpu_units.h"

#include <algorithm>
#include <cctype>

namespace hlocache::compiler {
namespace {

bool IsIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool IsIdentifierChar(char c) { return IsIdentifierStart(c) || (c >= '0' && c <= '9'); }

}  // namespace

namespace {

// Calls on_name(begin, end) for each identifier of C++ `text`, on_other for the text between.
template <typename OnName, typename OnOther>
void ScanIdentifiers(std::string_view text, OnName on_name, OnOther on_other) {
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    if (!IsIdentifierStart(text[i])) {
      // Skip numbers whole, so that the digits of 0x1p-3 never start a name.
      if (text[i] >= '0' && text[i] <= '9') {
        while (j < text.size() && IsIdentifierChar(text[j])) ++j;
      } else {
        ++j;
      }
      on_other(text.substr(i, j - i));
    } else {
      while (j < text.size() && IsIdentifierChar(text[j])) ++j;
      on_name(text.substr(i, j - i));
    }
    i = j;
  }
}

}  // namespace

std::vector<std::string> NamesUsed(std::string_view text,
                                   const std::map<std::string, std::string>& names) {
  std::vector<std::string> out;
  std::map<std::string_view, bool> seen;
  ScanIdentifiers(
      text,
      [&](std::string_view word) {
        if (!seen.contains(word) && names.contains(std::string(word))) {
          seen[word] = true;
          out.emplace_back(word);
        }
      },
      [](std::string_view) {});
  return out;
}

std::vector<std::string> Identifiers(std::string_view text) {
  std::vector<std::string> out;
  std::map<std::string_view, bool> seen;
  ScanIdentifiers(
      text,
      [&](std::string_view word) {
        if (seen.emplace(word, true).second) out.emplace_back(word);
      },
      [](std::string_view) {});
  return out;
}

std::string RenameNames(std::string_view text, const std::map<std::string, std::string>& to) {
  std::string out;
  out.reserve(text.size());
  ScanIdentifiers(
      text,
      [&](std::string_view word) {
        const auto it = to.find(std::string(word));
        out += it == to.end() ? word : std::string_view(it->second);
      },
      [&](std::string_view other) { out += other; });
  return out;
}

std::optional<std::string> ReplaceSubscripted(std::string_view text, std::string_view name,
                                              std::string_view subscript, std::string_view with) {
  std::string out;
  out.reserve(text.size());
  bool found = false, elsewise = false;
  size_t skip = 0;  // Bytes of a matched subscript still to leave out.
  auto other = [&](std::string_view piece) {
    if (skip >= piece.size()) {
      skip -= piece.size();
    } else {
      out += piece.substr(skip);
      skip = 0;
    }
  };
  ScanIdentifiers(
      text,
      [&](std::string_view word) {
        if (skip > 0 || word != name) return other(word);
        const size_t end = static_cast<size_t>(word.data() - text.data()) + word.size();
        if (!text.substr(end).starts_with(subscript)) {
          elsewise = true;
          return;
        }
        out += with;
        skip = subscript.size();
        found = true;
      },
      other);
  if (!found || elsewise) return std::nullopt;
  return out;
}

std::vector<std::string> PackUnits(const std::string& shared, const std::vector<CodePiece>& pieces,
                                   const CpuLoweringOptions& options) {
  size_t total = 0;
  for (const CodePiece& p : pieces) total += p.definition.size();
  size_t units = options.unit_bytes == 0 ? pieces.size()
                                         : (total + options.unit_bytes - 1) / options.unit_bytes;
  units = std::clamp<size_t>(units, 1, std::max<size_t>(options.max_units, 1));
  const size_t target = (total + units - 1) / units;
  std::vector<std::string> out(1, shared);
  size_t in_unit = 0;
  for (const CodePiece& p : pieces) {
    if (in_unit > 0 && in_unit + p.definition.size() / 2 > target && out.size() < units) {
      out.push_back(shared);
      in_unit = 0;
    }
    out.back() += p.definition;
    in_unit += p.definition.size();
  }
  return out;
}

SegmentedFunction::SegmentedFunction(std::string name, std::string signature,
                                     std::vector<std::pair<std::string, std::string>> params,
                                     size_t segment_bytes)
    : name_(std::move(name)),
      signature_(std::move(signature)),
      params_(std::move(params)),
      segment_bytes_(segment_bytes) {
  for (const auto& [param, type] : params_) pointer_types_[param] = type;
}

void SegmentedFunction::Declare(BufferDecl decl) {
  pointer_types_[decl.name] = decl.type + "*";
  buffers_.push_back(std::move(decl));
  declared_in_.push_back(segments_.size() - 1);
}

void SegmentedFunction::DeclarePointer(PointerDecl decl) {
  pointer_types_[decl.name] = "const " + decl.type + "*";
  pointers_.push_back(std::move(decl));
}

void SegmentedFunction::EndInstruction() {
  if (chunk_.empty()) return;
  Segment& current = segments_.back();
  current.bytes += chunk_.size();
  current.chunks.push_back(std::move(chunk_));
  chunk_.clear();
  if (current.bytes >= segment_bytes_) segments_.emplace_back();
}

std::optional<SegmentedFunction::NamedPointer> SegmentedFunction::Pointer(
    const std::string& name) const {
  // Whatever a pointer variable may hold is never unaliased (as in Finish).
  auto aliased = [&] {
    for (const PointerDecl& p : pointers_) {
      for (const std::string& expr : p.targets) {
        if (!NamesUsed(expr, {{name, ""}}).empty()) return true;
      }
    }
    return false;
  };
  const auto it = pointer_types_.find(name);
  if (it == pointer_types_.end()) return std::nullopt;
  const bool variable = std::any_of(pointers_.begin(), pointers_.end(),
                                    [&](const PointerDecl& p) { return p.name == name; });
  return NamedPointer{it->second, !variable && !aliased()};
}

std::vector<CodePiece> SegmentedFunction::FinishOne(const std::string& epilogue) const {
  std::string text = signature_ + " {\n";
  for (const BufferDecl& b : buffers_) {
    if (!b.alias.empty()) {
      text += "  " + b.type + "* const " + b.name + " = " + b.alias + ";\n";
      continue;
    }
    if (!b.on_heap) {
      text += "  alignas(64) " + b.type + " " + b.name + "[" + std::to_string(b.count) + "];\n";
      continue;
    }
    text += "  hc_temp<" + b.type + "> " + b.name + "_buf(" + std::to_string(b.count) +
            ");\n  if (!" + b.name +
            "_buf) return 1;  // Out of memory: the caller sees a failure.\n  " + b.type +
            "* const " + b.name + " = " + b.name + "_buf.get();\n";
  }
  for (const PointerDecl& p : pointers_) {
    text += "  const " + p.type + "* " + p.name + " = nullptr;\n";
  }
  for (const Segment& segment : segments_) {
    for (const std::string& chunk : segment.chunks) text += chunk;
  }
  text += chunk_ + epilogue + "  return 0;\n}\n\n";
  return {{signature_ + ";\n", std::move(text)}};
}

std::vector<CodePiece> SegmentedFunction::Finish(const std::string& epilogue) const {
  std::vector<const Segment*> segments;
  for (const Segment& segment : segments_) {
    if (!segment.chunks.empty()) segments.push_back(&segment);
  }
  if (segments.size() <= 1) return FinishOne(epilogue);

  // The frame: the parameters and results, then every buffer, one slot each.
  std::map<std::string, std::string> types;  // Name -> its pointer type.
  std::map<std::string, size_t> slots;
  for (const auto& [name, type] : params_) {
    slots[name] = slots.size();
    types[name] = type;
  }
  for (const BufferDecl& b : buffers_) {
    slots[b.name] = slots.size();
    types[b.name] = b.type + "*";
  }
  std::map<std::string, std::vector<std::string>> targets;  // Pointer variable -> names.
  for (const PointerDecl& p : pointers_) {
    slots[p.name] = slots.size();
    types[p.name] = "const " + p.type + "*";
    targets[p.name];
  }
  std::map<std::string, bool> aliased;  // Names a pointer variable may hold: never __restrict.
  for (const PointerDecl& p : pointers_) {
    for (const std::string& expr : p.targets) {
      for (std::string& n : NamesUsed(expr, types)) {
        aliased[n] = true;
        targets[p.name].push_back(std::move(n));
      }
    }
  }
  // A block's pointers, read from the frame; a pointer variable is written back at its end.
  auto unpack = [&](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) {
      const std::string qualifiers =
          targets.contains(n) ? "" : (aliased.contains(n) ? " const" : " const __restrict");
      out += "    " + types[n] + qualifiers + " " + n + " = static_cast<" + types[n] + ">(f[" +
             std::to_string(slots[n]) + "]);\n";
    }
    return out;
  };
  auto write_back = [&](const std::vector<std::string>& names) {
    std::string out;
    for (const PointerDecl& p : pointers_) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) continue;
      out += "    f[" + std::to_string(slots[p.name]) +
             "] = const_cast<void*>(static_cast<const void*>(" + p.name + "));\n";
    }
    return out;
  };
  // Extends `uses` (name -> the last segment naming it) so that whatever a pointer variable may
  // point to lives as long as the variable.
  auto extend_through_pointers = [&](std::map<std::string, size_t>& uses) {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [pointer, names] : targets) {
        auto p = uses.find(pointer);
        if (p == uses.end()) continue;
        const size_t until = p->second;
        for (const std::string& n : names) {
          auto [t, inserted] = uses.try_emplace(n, until);
          if (!inserted && t->second >= until) continue;
          t->second = until;
          changed = true;
        }
      }
    }
  };
  std::vector<CodePiece> pieces;
  std::map<std::string, size_t> last_use;  // Name -> the last segment naming it.
  for (size_t k = 0; k < segments.size(); ++k) {
    const std::string signature = "int " + name_ + "_s" + std::to_string(k) + "(void** f)";
    std::string text = signature + " {\n";
    for (const std::string& chunk : segments[k]->chunks) {
      const std::vector<std::string> names = NamesUsed(chunk, types);
      for (const std::string& n : names) last_use[n] = k;
      text += "  {\n" + unpack(names) + chunk + write_back(names) + "  }\n";
    }
    pieces.push_back(
        {"__attribute__((noinline)) " + signature + ";\n", text + "  return 0;\n}\n\n"});
  }
  extend_through_pointers(last_use);
  const std::vector<std::string> kept = NamesUsed(epilogue, types);
  std::map<std::string, size_t> kept_uses;  // Whatever the epilogue reads, through pointers too.
  for (const std::string& n : kept) kept_uses[n] = segments.size();
  extend_through_pointers(kept_uses);

  std::string owner = signature_ + " {\n";
  owner += "  std::unique_ptr<void*[]> frame(new (std::nothrow) void*[" +
           std::to_string(slots.size()) +
           "]);\n  if (!frame) return 1;\n  void** const f = frame.get();\n";
  for (const auto& [name, type] : params_) {
    owner += "  f[" + std::to_string(slots[name]) +
             "] = const_cast<void*>(static_cast<const void*>(" + name + "));\n";
  }
  for (const PointerDecl& p : pointers_) {
    owner += "  f[" + std::to_string(slots[p.name]) + "] = nullptr;\n";
  }
  // Small buffers share one arena, each at a multiple of 64 bytes.
  size_t arena = 0;
  std::vector<size_t> offset(buffers_.size(), 0);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (buffers_[b].on_heap || !buffers_[b].alias.empty()) continue;
    offset[b] = arena;
    arena += (static_cast<size_t>(buffers_[b].count * buffers_[b].element_bytes) + 63) / 64 * 64;
  }
  owner +=
      "  hc_heap heap(" + std::to_string(buffers_.size() + 1) + ");\n  if (!heap.ok()) return 1;\n";
  owner += "  char* const arena = static_cast<char*>(heap.alloc(" +
           std::to_string(buffers_.size()) + ", " + std::to_string(std::max<size_t>(arena, 64)) +
           "));\n  if (!arena) return 1;\n";
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (!buffers_[b].alias.empty()) {
      owner += "  f[" + std::to_string(slots[buffers_[b].name]) +
               "] = const_cast<void*>(static_cast<const void*>(" + buffers_[b].alias + "));\n";
    } else if (!buffers_[b].on_heap) {
      owner += "  f[" + std::to_string(slots[buffers_[b].name]) + "] = arena + " +
               std::to_string(offset[b]) + ";\n";
    }
  }
  for (size_t k = 0; k < segments.size(); ++k) {
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const BufferDecl& d = buffers_[b];
      if (!d.on_heap || !d.alias.empty() || std::min(declared_in_[b], segments.size() - 1) != k) {
        continue;
      }
      owner += "  if (!(f[" + std::to_string(slots[d.name]) + "] = heap.alloc(" +
               std::to_string(b) + ", " + std::to_string(d.count * d.element_bytes) +
               "))) return 1;\n";
    }
    owner += "  if (" + name_ + "_s" + std::to_string(k) + "(f) != 0) return 1;\n";
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const BufferDecl& d = buffers_[b];
      auto last = last_use.find(d.name);
      if (d.on_heap && d.alias.empty() && last != last_use.end() && last->second == k &&
          !kept_uses.contains(d.name)) {
        owner +=
            "  heap.release(" + std::to_string(b) + ");  // " + d.name + " is not named again.\n";
      }
    }
  }
  owner += "  {\n" + unpack(kept) + epilogue + "  }\n  return 0;\n}\n\n";
  pieces.push_back({signature_ + ";\n", std::move(owner)});
  return pieces;
}

}  // namespace hlocache::compiler
