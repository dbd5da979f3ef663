// The precision that runs on this CPU (see precision.h).
#include "model/precision.h"

#include "base/error.h"
#include "base/log.h"
#include "gemm/gemm.h"

namespace bertfit {

Precision runnable_precision(Precision asked) {
  if (asked == Precision::kInt8 && !has_int8_vnni()) {
    throw_error(
        "--precision int8 needs a CPU with VNNI (AVX512_VNNI or AVX_VNNI), which this one lacks; "
        "use bf16 or fp32");
  }
  if (asked != Precision::kBF16 || has_native_bf16()) return asked;
  log_warn(
      "--precision bf16: this CPU has no native bf16 matrix instructions (AVX512_BF16 or AMX); "
      "using fp32, which is faster here");
  return Precision::kF32;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBF16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
    case Precision::kF32:
      break;
  }
  return "fp32";
}

}  // namespace bertfit
