// The precision of the model's matrix products.
#pragma once

namespace bertfit {

// kBF16: inputs and weights rounded to bf16, fp32 accumulation and outputs; parameters,
// gradients, optimizer state, LayerNorm, softmax, attention and the loss stay fp32 (mixed
// precision as PyTorch's autocast does it).
// kInt8 (inference only): the encoder layers' products on int8 (gemm.h's linear_forward_int8:
// weights per output channel, inputs per row, exact int32 sums); attention as in kBF16 (q, k,
// v and the probabilities rounded to bf16 for its per-head products) on a CPU with native bf16
// products, else in fp32; everything else, the head's two small products included, in fp32.
enum class Precision { kF32, kBF16, kInt8 };

// The precision that runs on this CPU for the one asked: bf16 without native bf16 products
// (AVX512_BF16 or AMX) is emulated and slower than fp32, so it runs in fp32, with a warning;
// int8 without VNNI (AVX512_VNNI or AVX_VNNI) is an Error, since its products would be slower
// or, summed in saturating 16-bit arithmetic, wrong. Options keep what was asked, so a
// checkpoint's saved --precision does not depend on the machine.
Precision runnable_precision(Precision asked);
const char* precision_name(Precision p);

}  // namespace bertfit
