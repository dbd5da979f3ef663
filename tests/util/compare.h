// What the reference tests share: the L2 norm and the relative L2 error of a tensor against its
// reference (with a floor for tensors whose true value is about 0, such as the attention key
// biases' gradients), nested JSON arrays flattened, and one tensor of a safetensors file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace bertfit::testing {

template <class T>
double l2(const T* v, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
  return std::sqrt(s);
}

// ‖got − want‖ / max(‖want‖, floor) over n elements.
template <class A, class B>
double rel_err(const A* got, const B* want, std::size_t n, double floor = 0) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    d += e * e;
  }
  return std::sqrt(d) / std::max(l2(want, n), floor);
}

template <class A, class B>
double rel_err(const std::vector<A>& got, const std::vector<B>& want, double floor = 0) {
  EXPECT_EQ(got.size(), want.size());
  return rel_err(got.data(), want.data(), std::min(got.size(), want.size()), floor);
}

// A number or nested arrays of numbers, in row-major order.
inline std::vector<double> flat_json(const nlohmann::json& j) {
  if (!j.is_array()) return {j.get<double>()};
  std::vector<double> out;
  for (const auto& x : j) {
    std::vector<double> part = flat_json(x);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// A tensor of the file as floats; a failed expectation (and nothing) when it is absent.
inline std::vector<float> read_tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> v(t->shape.numel());
  f.read_f32(*t, v.data());
  return v;
}

}  // namespace bertfit::testing
