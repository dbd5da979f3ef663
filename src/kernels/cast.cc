// fp32 -> bf16 cast, vectorised by the compiler (integer rounding on the bit pattern).
#include "kernels/cast.h"

#include <cstring>

#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {

void cast_f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n) {
  parallel_for(n, detail::kMinWorkPerThread, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      std::uint32_t u;
      std::memcpy(&u, in + i, sizeof u);
      const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
      const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      out[i] = static_cast<std::uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
    }
  });
}

}  // namespace bertfit
