// core/shape.h — Shape: a tensor's sizes (or strides), stored inline.
//
// NOTE: a fixed inline capacity (kMaxDims) instead of std::vector means creating a tensor
// costs no heap allocation for its sizes and strides — part of keeping host overhead per
// op small.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "memgrad/core/error.h"

namespace mg {

inline constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  Shape(const std::vector<int64_t>& values) { assign(values.begin(), values.end()); }  // NOLINT
  template <class It>
  Shape(It first, It last) { assign(first, last); }
  // n copies of value
  static Shape filled(int n, int64_t value) {
    Shape shape;
    for (int i = 0; i < n; ++i) shape.push_back(value);
    return shape;
  }

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t& operator[](int i) { return values_[i]; }
  int64_t operator[](int i) const { return values_[i]; }
  int64_t* begin() { return values_; }
  int64_t* end() { return values_ + size_; }
  const int64_t* begin() const { return values_; }
  const int64_t* end() const { return values_ + size_; }
  int64_t back() const { return values_[size_ - 1]; }

  void push_back(int64_t value) {
    MG_CHECK(size_ < kMaxDims, "tensors have at most ", kMaxDims, " dimensions");
    values_[size_++] = value;
  }
  void insert(int position, int64_t value) {
    push_back(0);
    std::copy_backward(values_ + position, values_ + size_ - 1, values_ + size_);
    values_[position] = value;
  }
  void erase(int position) {
    std::copy(values_ + position + 1, values_ + size_, values_ + position);
    --size_;
  }

  // Product of the values (1 for a 0-d shape).
  int64_t numel() const {
    int64_t product = 1;
    for (int i = 0; i < size_; ++i) product *= values_[i];
    return product;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  std::string str() const;  // "[2, 3]"

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  int64_t values_[kMaxDims] = {};
  int size_ = 0;
};

inline std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.str(); }

// Contiguous (row-major) strides for sizes.
Shape contiguous_strides(const Shape& sizes);
// NumPy broadcasting of two shapes; throws naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// A contiguous tensor seen along `dim` as (outer, extent, inner): element (o, k, i) sits at
// (o * extent + k) * inner + i, and each (o, i) line along dim is independent (softmax,
// argmax and friends work line by line, on the CPU and the GPU alike).
struct LinesAlong {
  int64_t outer = 1, extent = 1, inner = 1;
};
LinesAlong lines_along(const Shape& sizes, int dim);

// Wraps a possibly negative dimension index into [0, ndim); `ndim` 0 accepts 0 and -1.
int wrap_dim(int64_t dim, int ndim);

}  // namespace mg
