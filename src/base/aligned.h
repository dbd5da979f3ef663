// 64-byte aligned, zero-initialised heap buffers for flat parameter/gradient/activation storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace bertfit {

inline constexpr std::size_t kAlignment = 64;

// Buffers of at least this many bytes are mapped from the kernel directly (zero pages, touched
// lazily, returned whole when freed) instead of coming from malloc: training reallocates large
// activation buffers as batch shapes grow and evaluation allocates its own, and glibc's heap kept
// those freed blocks as fragments (450 MB more peak RSS over a 30-step DistilBERT run).
inline constexpr std::size_t kMapThreshold = std::size_t{1} << 20;

// Zeroed memory of `bytes` (a multiple of kAlignment), aligned to kAlignment. Throws
// std::bad_alloc. Release with release_zeroed(p, bytes).
void* allocate_zeroed(std::size_t bytes);
void release_zeroed(void* p, std::size_t bytes) noexcept;

// Returns the memory of the whole pages inside [p, p + bytes) of a live allocation to the
// system: they read as zeros afterwards (and take memory again only if written). For data a
// process will never read again, e.g. fp32 weights replaced by their prepared copies. Returns
// the bytes released.
std::size_t discard_pages(void* p, std::size_t bytes) noexcept;

// A fixed-size array of T (trivial types only), aligned to kAlignment and zeroed.
template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t n) { resize(n); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { release(); }

  // Discards the contents: the new buffer is zeroed.
  void resize(std::size_t n) {
    release();
    if (n == 0) return;
    const std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(allocate_zeroed(bytes));
    size_ = n;
    bytes_ = bytes;
  }
  void zero();

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  void release() noexcept {
    if (data_ != nullptr) release_zeroed(data_, bytes_);
    data_ = nullptr;
    size_ = 0;
    bytes_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t bytes_ = 0;
};

void zero_bytes(void* p, std::size_t bytes);

template <class T>
void AlignedBuffer<T>::zero() {
  if (size_ > 0) zero_bytes(data_, size_ * sizeof(T));
}

}  // namespace bertfit
