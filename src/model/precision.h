// The precision of the model's matrix products.
#pragma once

#include <string>

namespace bertfit {

// kBF16: inputs and weights rounded to bf16, fp32 accumulation and outputs; parameters,
// gradients, optimizer state, LayerNorm, softmax, attention and the loss stay fp32 (mixed
// precision as PyTorch's autocast does it).
// kInt8 (inference only): the encoder layers' products on int8 (gemm.h's linear_forward_int8:
// weights per output channel, inputs per row, exact int32 sums); everything else, the head's
// two small products included, in fp32.
enum class Precision { kF32, kBF16, kInt8 };

// "fp32" / "bf16" / "int8" -> Precision; Error naming the flag otherwise. With bf16 on a CPU
// without native bf16 products, logs a warning and returns kF32 (emulated bf16 is slower than
// fp32); int8 on a CPU without VNNI is an Error (its products would be slower or, summed in
// saturating 16-bit arithmetic, wrong).
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);

}  // namespace bertfit
