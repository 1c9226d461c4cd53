// A fixed set of short words (opcodes, element types, attribute names) mapped to small values,
// looked up with one hash and, almost always, one comparison.
//
// The parser looks up an opcode, a type or an attribute name for nearly every instruction; a
// binary search over a sorted list costs seven string comparisons a lookup, which showed up as
// a tenth of keying time on modules with short lines. Built once (tables are function-local
// statics); immutable after construction, so concurrent lookups are safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>
#include <vector>

#include "compiler/hlo/name_table.h"

namespace hlocache::hlo {

class WordTable {
 public:
  // `words` (an array or container of string_views) must be distinct, and must outlive the
  // table; Find returns a word's position in it.
  template <typename Words>
  explicit WordTable(const Words& words) {
    const size_t count = std::size(words);
    size_t size = 16;
    while (size < count * 4) size *= 2;  // Sparse: probes stay short.
    shift_ = 64;
    for (size_t s = size; s > 1; s >>= 1) --shift_;
    slots_.assign(size, Slot{});
    int32_t value = 0;
    for (std::string_view w : words) {
      size_t i = Hash(w) >> shift_;
      while (slots_[i].value >= 0) i = (i + 1) & (size - 1);
      slots_[i] = Slot{w, value++};
    }
  }

  // The position of `word` in the list given at construction, or -1.
  int32_t Find(std::string_view word) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = Hash(word) >> shift_;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.value < 0) return -1;
      if (s.word.size() == word.size() &&
          NameTable::SameBytes(s.word.data(), word.data(), word.size())) {
        return s.value;
      }
    }
  }

 private:
  struct Slot {
    std::string_view word;
    int32_t value = -1;
  };

  // Mixes the length with the first and last eight bytes (every byte of a shorter word): enough
  // to tell apart the words of one table, which share long prefixes (all-reduce,
  // all-reduce-start) but not both ends and length.
  static uint64_t Hash(std::string_view w) {
    uint64_t head = 0;
    uint64_t tail = 0;
    const size_t n = w.size();
    if (n >= 8) {
      std::memcpy(&head, w.data(), 8);
      std::memcpy(&tail, w.data() + n - 8, 8);
    } else if (n >= 4) {
      // Two loads that overlap cover every byte: no loop over them (most words are this short).
      uint32_t first = 0;
      uint32_t last = 0;
      std::memcpy(&first, w.data(), 4);
      std::memcpy(&last, w.data() + n - 4, 4);
      head = first | (uint64_t{last} << 32);
    } else if (n > 0) {
      const auto byte = [&](size_t k) { return uint64_t{static_cast<unsigned char>(w[k])}; };
      head = byte(0) | (byte(n / 2) << 8) | (byte(n - 1) << 16);
    }
    uint64_t h = (head * 0x9e3779b97f4a7c15ull) ^ (tail * 0xc2b2ae3d27d4eb4full) ^
                 (n * 0x165667b19e3779f9ull);
    h ^= h >> 31;
    return h * 0xd6e8feb86659fd93ull;
  }

  std::vector<Slot> slots_;
  int shift_ = 64;
};

}  // namespace hlocache::hlo
