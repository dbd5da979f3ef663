// Precision casts for mixed-precision matrix products: fp32 -> bf16 with round-to-nearest-even
// (NaN stays NaN), the rounding base/dtype.h defines.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace bertfit {

// out[i] = bf16(in[i]) for n elements; bf16 values are stored as their 16 upper bits.
void cast_f32_to_bf16(std::uint16_t* out, const float* in, std::int64_t n);

}  // namespace bertfit
