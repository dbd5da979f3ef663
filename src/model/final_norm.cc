// The final norm of pre-norm families (see final_norm.h).
#include "model/final_norm.h"

#include "base/check.h"
#include "kernels/kernels.h"
#include "model/family.h"

namespace bertfit {
namespace {

// The rows the last layer computed: the first tokens alone, or every token row.
std::int64_t rows(const Activations& a) { return a.cls_only ? a.B : a.N; }

}  // namespace

void FinalNorm::declare(const ModelConfig& c, LayoutBuilder& b) {
  CHECK(c.family->final_norm != nullptr, "a pre-norm family names its final norm");
  b.group();
  b.layer_norm(c.family->final_norm, Role::kFinalLnW, c.hidden, c.structure.norm_bias);
}

void FinalNorm::forward(Activations& a) const {
  const ModelConfig& c = w_.config();
  const int L = c.layers;
  layernorm_forward(a.final_out.data(), a.final_mean.data(), a.final_rstd.data(),
                    a.layer_out(L - 1), w_(Role::kFinalLnW, L - 1),
                    w_.maybe(Role::kFinalLnB, L - 1), rows(a), c.hidden,
                    static_cast<float>(c.layer_norm_eps));
}

void FinalNorm::backward(float* grads, Activations& a, GradsReady& ready) const {
  const ModelConfig& c = w_.config();
  const ParamLayout& lay = w_.layout();
  const int L = c.layers;
  float* db =
      lay.has(Role::kFinalLnB, L - 1) ? grads + lay.offset(Role::kFinalLnB, L - 1) : nullptr;
  layernorm_backward(a.d_in.data(), grads + lay.offset(Role::kFinalLnW, L - 1), db, a.d_out.data(),
                     a.layer_out(L - 1), w_(Role::kFinalLnW, L - 1), a.final_mean.data(),
                     a.final_rstd.data(), rows(a), c.hidden);
  ready.done();
}

}  // namespace bertfit
