// Allocation of AlignedBuffer storage: malloc for small blocks, anonymous mappings for large ones.
#include "base/aligned.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace bertfit {
namespace {

// Large mappings ask for transparent huge pages (the kernel here grants them on request only):
// fewer page faults on first touch and fewer TLB misses in the products that stream over them.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

void* allocate_zeroed(std::size_t bytes) {
  if (bytes >= kMapThreshold) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advisory: failure is harmless
    return p;  // page-aligned and zero-filled by the kernel
  }
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return p;
}

void release_zeroed(void* p, std::size_t bytes) noexcept {
  if (bytes >= kMapThreshold) {
    munmap(p, bytes);
  } else {
    std::free(p);
  }
}

std::size_t discard_pages(void* p, std::size_t bytes) noexcept {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / page * page;
  if (end <= begin) return 0;
  // On private anonymous memory (mapped buffers) and glibc's heap alike, the pages become
  // zero-fill-on-demand.
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

void zero_bytes(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

}  // namespace bertfit
