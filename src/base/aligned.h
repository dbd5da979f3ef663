// 64-byte aligned, zero-initialised heap buffers for flat parameter/gradient/activation storage.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>

namespace bertfit {

inline constexpr std::size_t kAlignment = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A fixed-size array of T (trivial types only), aligned to kAlignment and zeroed.
template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { resize(n); }

  void resize(std::size_t n) {
    if (n == 0) {
      data_.reset();
      size_ = 0;
      return;
    }
    std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    data_.reset(static_cast<T*>(p));
    size_ = n;
  }
  void zero() {
    if (size_ > 0) std::memset(data_.get(), 0, size_ * sizeof(T));
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }
  std::span<T> span() { return {data(), size_}; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  std::unique_ptr<T, FreeDeleter> data_;
  std::size_t size_ = 0;
};

}  // namespace bertfit
