// A flat, open-addressing map from names (views into the source) to indices.
//
// The parser resolves every operand through one of these; std::unordered_map spent a third of
// parse time allocating nodes and chasing chains. Clear() keeps capacity for reuse across
// computations. Names must be views into one source text, given at construction: a slot holds
// an offset, not a pointer, so that it fits in 16 bytes (a module's biggest table outgrows the
// cache, and each lookup pays one miss per slot line). Not thread-safe; owned by one parser.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace hlocache::hlo {

class NameTable {
 public:
  // `source`: the text every name is a view into; it must outlive the table.
  explicit NameTable(std::string_view source) : source_(source) {}

  // Index for `name`, or -1.
  int32_t Find(std::string_view name) const {
    if (slots_.empty()) return -1;
    const uint64_t h = Hash(name);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.index < 0) return -1;
      if (s.hash == static_cast<uint32_t>(h) && NameOf(s) == name) return s.index;
    }
  }

  // Inserts name -> index; returns false (and changes nothing) if the name is already present.
  bool Insert(std::string_view name, int32_t index) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
    const uint64_t h = Hash(name);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.index < 0) {
        // Callers pass views into source_ (see the class comment).
        s = Slot{static_cast<uint32_t>(h), index,
                 static_cast<uint32_t>(name.data() - source_.data()),
                 static_cast<uint32_t>(name.size())};
        ++size_;
        used_.push_back(static_cast<uint32_t>(i));
        return true;
      }
      if (s.hash == static_cast<uint32_t>(h) && NameOf(s) == name) return false;
    }
  }

  // Makes room for `count` names without regrowing on the way (which rehashes every entry).
  void Reserve(size_t count) {
    size_t want = 64;
    while (want * 3 < count * 4) want *= 2;
    if (want > slots_.size()) Resize(want);
  }

  // Proportional to the entries, not the capacity: one big computation must not make every
  // later small one pay for its table.
  void Clear() {
    for (uint32_t i : used_) slots_[i].index = -1;
    used_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    uint32_t hash = 0;  // Low bits of the name's hash.
    int32_t index = -1;
    uint32_t offset = 0;  // The name, in source_.
    uint32_t length = 0;
  };
  static_assert(sizeof(Slot) == 16);

  std::string_view NameOf(const Slot& s) const { return source_.substr(s.offset, s.length); }

  static uint64_t Hash(std::string_view name) { return XXH3_64bits(name.data(), name.size()); }

  void Grow() { Resize(slots_.empty() ? 64 : slots_.size() * 2); }

  void Resize(size_t slot_count) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(slot_count, Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    used_.clear();
    for (const Slot& s : old) {
      if (s.index < 0) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {  // mask_ < 2^32.
        if (slots_[i].index < 0) {
          slots_[i] = s;
          ++size_;
          used_.push_back(static_cast<uint32_t>(i));
          break;
        }
      }
    }
  }

  std::string_view source_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> used_;  // Occupied slot positions, for Clear().
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace hlocache::hlo
