// A flat, open-addressing map from names (views into the source) to indices.
//
// The parser resolves every operand through one of these; std::unordered_map spent a third of
// parse time allocating nodes and chasing chains. Clear() keeps capacity for reuse across
// computations. Not thread-safe; owned by one parser.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace hlocache::hlo {

class NameTable {
 public:
  // Index for `name`, or -1.
  int32_t Find(std::string_view name) const {
    if (slots_.empty()) return -1;
    const uint64_t h = Hash(name);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.index < 0) return -1;
      if (s.hash == h && s.name == name) return s.index;
    }
  }

  // Inserts name -> index; returns false (and changes nothing) if the name is already present.
  bool Insert(std::string_view name, int32_t index) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
    const uint64_t h = Hash(name);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.index < 0) {
        s = Slot{h, name, index};
        ++size_;
        used_.push_back(static_cast<uint32_t>(i));
        return true;
      }
      if (s.hash == h && s.name == name) return false;
    }
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
    uint64_t hash = 0;
    std::string_view name;
    int32_t index = -1;
  };

  static uint64_t Hash(std::string_view name) { return XXH3_64bits(name.data(), name.size()); }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    used_.clear();
    for (const Slot& s : old) {
      if (s.index < 0) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].index < 0) {
          slots_[i] = s;
          ++size_;
          used_.push_back(static_cast<uint32_t>(i));
          break;
        }
      }
    }
  }

  std::vector<Slot> slots_;
  std::vector<uint32_t> used_;  // Occupied slot positions, for Clear().
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace hlocache::hlo
