// A vector of trivially copyable values that keeps its first N in place.
//
// An HLO instruction has one to three operands nearly always, and a parsed module holds tens of
// thousands of instructions: a heap block per operand list was a third of a large module's
// allocations (and as many frees when the module goes); so were a shape's dimensions.
// SmallVector<int32_t, 4> is as big as a std::vector (24 bytes), SmallVector<int64_t, 4> 16
// bytes bigger, and both allocate only past four elements. It offers the part of
// std::vector's interface such lists use; iterators are plain pointers, invalidated as
// std::vector's are (by growth), and also by moving the vector while its elements are in place.
//
// Sizes are 32-bit: at most 2^32 - 1 elements (an operand list of a 2 GiB module is far below).
// Thread safety: as std::vector (const access from several threads; no concurrent mutation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace hlocache {

template <typename T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "elements are moved with memcpy");
  static_assert(N > 0 && N * sizeof(T) >= sizeof(T*), "the in-place room doubles as the pointer");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { Append(values.begin(), values.size()); }
  // From a range of elements: pointers, or the iterators of a contiguous container.
  template <std::contiguous_iterator It>
  SmallVector(It first, It last) {
    Append(std::to_address(first), static_cast<size_t>(last - first));
  }
  // A std::vector's elements, copied (shapes built from computed dimension lists).
  SmallVector(const std::vector<T>& values) { Append(values.data(), values.size()); }
  SmallVector(const SmallVector& other) { CopyFrom(other); }
  SmallVector(SmallVector&& other) noexcept { Take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      CopyFrom(other);
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      Release();
      Take(other);
    }
    return *this;
  }
  ~SmallVector() { Release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  T* data() { return OnHeap() ? heap_ : in_place_; }
  const T* data() const { return OnHeap() ? heap_ : in_place_; }

  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }

  template <std::contiguous_iterator It>
  void assign(It first, It last) {
    clear();
    Append(std::to_address(first), static_cast<size_t>(last - first));
  }
  void reserve(size_t count) {
    if (count > capacity_) Grow(count);
  }
  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T copy = value;  // `value` may be an element, which growth moves.
      Grow(static_cast<size_t>(capacity_) * 2);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = value;
  }
  void emplace_back(const T& value) { push_back(value); }
  void pop_back() { --size_; }
  // Removes the element at `at`; returns the position after it.
  iterator erase(const_iterator at) {
    const auto i = static_cast<size_t>(at - data());
    std::copy(data() + i + 1, data() + size_, data() + i);
    --size_;
    return data() + i;
  }
  void clear() { size_ = 0; }
  void resize(size_t count, const T& value = T()) {
    reserve(count);
    std::fill(data() + size_, data() + std::max<size_t>(count, size_), value);
    size_ = static_cast<uint32_t>(count);
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool OnHeap() const { return capacity_ > N; }

  void Append(const T* values, size_t count) {
    reserve(size_ + count);
    if (count != 0) std::memcpy(data() + size_, values, count * sizeof(T));
    size_ += static_cast<uint32_t>(count);
  }

  void Grow(size_t count) {
    T* fresh = static_cast<T*>(::operator new(count * sizeof(T)));
    if (size_ != 0) std::memcpy(fresh, data(), size_ * sizeof(T));
    Release();
    heap_ = fresh;
    capacity_ = static_cast<uint32_t>(count);
  }

  void Release() {
    if (OnHeap()) ::operator delete(heap_);
  }

  // Into this empty vector. Elements that fit in place are copied as the whole room, a copy of
  // fixed size the compiler makes a few moves: one of their exact size was a library call, in
  // each copy of every shape and operand list.
  void CopyFrom(const SmallVector& other) {
    if (other.size_ <= N && !OnHeap()) {
      std::memcpy(in_place_, other.data(), sizeof(in_place_));  // other's room holds N.
      size_ = other.size_;
      return;
    }
    Append(other.data(), other.size());
  }

  // Leaves `other` empty, in place.
  void Take(SmallVector& other) {
    if (other.OnHeap()) {
      heap_ = other.heap_;
    } else {
      std::memcpy(in_place_, other.in_place_, sizeof(in_place_));  // As in CopyFrom.
    }
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.size_ = 0;
    other.capacity_ = N;
  }

  union {
    T in_place_[N] = {};  // Zeroed: whole-room copies read no indeterminate bytes.
    T* heap_;
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
};

}  // namespace hlocache
