// Appends to a std::string with the room made sure of once for many small pieces.
//
// The canonical text is a line at a time of a dozen pieces of a few bytes each (`  `, `i123`,
// ` = `, `, `, a shape). std::string::append checks the capacity and calls memmove for every
// one of them; printing a large module's lines that way took a tenth of its canonicalization.
// A TextWriter takes the room a line can need first (Reserve), then copies each piece with
// plain stores.
//
// Contract: between Reserve(n) and the next Reserve, the Put calls write at most n bytes (the
// caller bounds its line; nothing is checked in between). The string's size is its capacity
// while the writer is open, its bytes past the written ones unspecified: Finish() (or the
// destructor) cuts it to what was written. Not thread-safe; borrows the string, which must
// outlive the writer and not be touched by anyone else while it is open.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace hlocache::hlo {

class TextWriter {
 public:
  explicit TextWriter(std::string& out) : out_(out), end_(out.size()) {}
  TextWriter(const TextWriter&) = delete;
  TextWriter& operator=(const TextWriter&) = delete;
  ~TextWriter() { Finish(); }

  // Makes room for `bytes` more, without zeroing what is to be written: the string's capacity
  // while it is enough, else twice that (or what is needed). Grown from the capacity, not the
  // size: a string that many writers open in turn (the canonicalizer's arena) is as large as
  // what was written each time one opens, and doubling that moved it to a block twice its
  // capacity once half of it was filled.
  void Reserve(size_t bytes) {
    if (out_.size() - end_ >= bytes) return;
    const size_t need = end_ + bytes;
    const size_t want =
        need <= out_.capacity() ? out_.capacity() : std::max(need, out_.capacity() * 2);
    out_.resize_and_overwrite(want, [](char*, size_t n) { return n; });
  }

  void Put(char c) { out_.data()[end_++] = c; }

  // A string literal: a copy of known length, which the compiler makes a store or two.
  template <size_t N>
  void Put(const char (&literal)[N]) {
    std::memcpy(out_.data() + end_, literal, N - 1);
    end_ += N - 1;
  }

  void Put(std::string_view s) {
    CopyShort(out_.data() + end_, s.data(), s.size());
    end_ += s.size();
  }

  // `prefix` and a non-negative number: `i12`, `c3`. At most 11 bytes.
  void PutNumbered(char prefix, int32_t number) {
    char* p = out_.data() + end_;
    *p = prefix;
    end_ = static_cast<size_t>(std::to_chars(p + 1, p + 12, number).ptr - out_.data());
  }

  // At most 20 bytes.
  void PutDecimal(int64_t number) {
    char* p = out_.data() + end_;
    end_ = static_cast<size_t>(std::to_chars(p, p + 20, number).ptr - out_.data());
  }

  // Cuts the string to what was written; the writer may go on after a Reserve.
  void Finish() { out_.resize(end_); }

  // For a text streamed through a small buffer: the string's bytes written so far (all of them,
  // what it held before the writer opened included), after which it writes from its start again.
  size_t written() const { return end_; }
  std::string_view Written() const { return std::string_view(out_.data(), end_); }
  void Rewind() { end_ = 0; }

 private:
  // memcpy, in line for the short pieces that are nearly all of them: two overlapping loads
  // and stores instead of a library call.
  static void CopyShort(char* to, const char* from, size_t n) {
    if (n >= 8 && n <= 16) {
      uint64_t a, b;
      std::memcpy(&a, from, 8);
      std::memcpy(&b, from + n - 8, 8);
      std::memcpy(to, &a, 8);
      std::memcpy(to + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
      uint32_t a, b;
      std::memcpy(&a, from, 4);
      std::memcpy(&b, from + n - 4, 4);
      std::memcpy(to, &a, 4);
      std::memcpy(to + n - 4, &b, 4);
    } else if (n > 0 && n < 4) {
      to[0] = from[0];
      to[n / 2] = from[n / 2];
      to[n - 1] = from[n - 1];
    } else if (n > 16) {
      std::memcpy(to, from, n);
    }
  }

  std::string& out_;
  size_t end_;  // Bytes written; out_.size() is the room.
};

}  // namespace hlocache::hlo
