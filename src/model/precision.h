// The precision of the model's matrix products.
#pragma once

#include <string>

namespace bertfit {

// kBF16: inputs and weights rounded to bf16, fp32 accumulation and outputs; parameters,
// gradients, optimizer state, LayerNorm, softmax, attention and the loss stay fp32 (mixed
// precision as PyTorch's autocast does it).
enum class Precision { kF32, kBF16 };

// "fp32" / "bf16" -> Precision; Error naming the flag otherwise. With bf16 on a CPU without
// native bf16 products, logs a warning and returns kF32 (emulated bf16 is slower than fp32).
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);

}  // namespace bertfit
