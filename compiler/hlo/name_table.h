// A flat, open-addressing map from names (views into the source) to indices.
//
// The parser resolves every operand through one of these; std::unordered_map spent a third of
// parse time allocating nodes and chasing chains. Clear() keeps capacity for reuse across
// computations. Names must be views into one source text, given at construction: a slot holds
// an offset, not a pointer, so that it fits in 16 bytes (a module's biggest table outgrows the
// cache, and each lookup pays one miss per slot line). Not thread-safe; owned by one parser.
#pragma once

#include <cstdint>
#include <cstring>
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
      if (Matches(s, h, name)) return s.index;
    }
  }

  // Inserts name -> index; returns false (and changes nothing) if the name is already present.
  // One probe sequence serves both the check and the insertion.
  bool Insert(std::string_view name, int32_t index) { return Insert(name, index, Hash(name)); }

  // Insert with the name's Hash(), as Prefetch returned it.
  bool Insert(std::string_view name, int32_t index, uint64_t h) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
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
      if (Matches(s, h, name)) return false;
    }
  }

  // Starts loading the slot where `name` would be inserted and returns its Hash(), for an
  // Insert a while later. A large computation's table outgrows the caches and each insertion
  // waited on a miss there (nine tenths of Insert's time in a 42,000-instruction module); the
  // parser knows an instruction's name a whole instruction before it may insert it.
  uint64_t Prefetch(std::string_view name) const {
    const uint64_t h = Hash(name);
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_], 1);
    return h;
  }

  // The table's hash of a name (public for its tests). Names are short (`add.123`,
  // `fusion.4.clone`): inline word loads and a multiply mix, where a library hash cost a call
  // and its length dispatch on every operand. Equal names hash equal; nothing is stored.
  static uint64_t Hash(std::string_view name) {
    const char* p = name.data();
    const size_t n = name.size();
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
    if (n >= 8) {
      // Whole words, then the last eight bytes (overlapping the previous word when n % 8 != 0),
      // each folded in with one multiply (odd: no bit is lost); the finalizer below spreads
      // them. A finalizer a word made a chain three times as long for the usual two-word name.
      constexpr uint64_t kOdd = 0xc4ceb9fe1a85ec53ULL;
      size_t i = 0;
      for (; i + 8 < n; i += 8) h = (h ^ Load64(p + i)) * kOdd;
      h = (h ^ Load64(p + n - 8)) * kOdd;
    } else if (n >= 4) {
      h ^= Load32(p) | (static_cast<uint64_t>(Load32(p + n - 4)) << 32);
    } else if (n > 0) {
      const auto byte = [&](size_t k) { return static_cast<uint64_t>(static_cast<uint8_t>(p[k])); };
      h ^= byte(0) | (byte(n / 2) << 8) | (byte(n - 1) << 16);
    }
    return Mix(h);
  }

  // memcmp(a, b, n) == 0, inline up to 32 bytes (two or four overlapping loads a side; the
  // first, middle and last byte below 4) instead of a library call per lookup. Also the word
  // tables' comparison (word_table.h), whose opcodes and types are mostly of 3 to 8 bytes. Public
  // for its tests.
  static bool SameBytes(const char* a, const char* b, size_t n) {
    if (n >= 8 && n <= 16) {
      return Load64(a) == Load64(b) && Load64(a + n - 8) == Load64(b + n - 8);
    }
    if (n > 16 && n <= 32) {  // Long names (`sharding_constraint.2251`) and shapes' texts.
      return Load64(a) == Load64(b) && Load64(a + 8) == Load64(b + 8) &&
             Load64(a + n - 16) == Load64(b + n - 16) && Load64(a + n - 8) == Load64(b + n - 8);
    }
    if (n >= 4 && n < 8) {
      return Load32(a) == Load32(b) && Load32(a + n - 4) == Load32(b + n - 4);
    }
    if (n < 4) {
      return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
    }
    return std::memcmp(a, b, n) == 0;
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

  bool Matches(const Slot& s, uint64_t h, std::string_view name) const {
    return s.hash == static_cast<uint32_t>(h) && s.length == name.size() &&
           SameBytes(source_.data() + s.offset, name.data(), name.size());
  }

  static uint64_t Load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static uint32_t Load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // The 64-bit finalizer of MurmurHash3: every input bit reaches the low bits the slots use.
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
  }

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
