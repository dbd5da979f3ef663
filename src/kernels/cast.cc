// fp32 -> bf16 cast, vectorised by the compiler (integer rounding on the bit pattern).
#include "kernels/cast.h"

#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {

void cast_f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n) {
  parallel_for(n, detail::kMinWorkPerThread, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = f32_to_bf16(in[i]);
  });
}

}  // namespace bertfit
