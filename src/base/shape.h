// Tensor shapes: a short list of dimensions with element count and printing.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace bertfit {

struct Shape {
  std::vector<std::int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d) : dims(d) {}
  explicit Shape(std::vector<std::int64_t> d) : dims(std::move(d)) {}

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
  std::size_t rank() const { return dims.size(); }
  bool operator==(const Shape&) const = default;
  std::string str() const {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(dims[i]);
    }
    return s + "]";
  }
};

}  // namespace bertfit
