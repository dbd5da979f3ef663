// Token embeddings: out = word[id] (+ type[t]) + pos[p] in Hugging Face's addition order.
// The backward scatter is partitioned by columns: each thread owns a column range of every
// table and walks the N rows in order, so repeated ids never race and the result is the same
// bits whatever the thread count.
#include "kernels/embedding.h"

#include "base/check.h"
#include "base/parallel.h"
#include "kernels/grain.h"

namespace bertfit {

void embedding_forward(float* out, const std::int32_t* ids, const std::int32_t* positions,
                       const std::int32_t* types, const float* word, const float* pos,
                       const float* type, std::int64_t N, int C) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  CHECK(type == nullptr || types != nullptr, "a token-type table needs token types");
  parallel_for(N, detail::rows_grain(C), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      CHECK(ids[r] >= 0 && (pos == nullptr || positions[r] >= 0), "row ", r, ": id ", ids[r],
            ", position ", pos == nullptr ? 0 : positions[r]);
      const float* w = word + static_cast<std::int64_t>(ids[r]) * C;
      float* o = out + r * C;
      if (pos == nullptr) {
        // DeBERTa-v3 (no absolute positions): inputs_embeds (+ token types when it has them).
        const float* t = type != nullptr ? type + static_cast<std::int64_t>(types[r]) * C : nullptr;
        for (int c = 0; c < C; ++c) o[c] = t != nullptr ? w[c] + t[c] : w[c];
        continue;
      }
      const float* p = pos + static_cast<std::int64_t>(positions[r]) * C;
      if (type != nullptr) {
        CHECK(types[r] >= 0, "row ", r, ": token type ", types[r]);
        const float* t = type + static_cast<std::int64_t>(types[r]) * C;
        // BERT: embeddings = inputs_embeds + token_type_embeddings; embeddings += position.
        for (int c = 0; c < C; ++c) o[c] = (w[c] + t[c]) + p[c];
      } else {
        // DistilBERT: input_embeds + position_embeddings.
        for (int c = 0; c < C; ++c) o[c] = w[c] + p[c];
      }
    }
  });
}

void embedding_backward(float* dword, float* dpos, float* dtype, const float* dout,
                        const std::int32_t* ids, const std::int32_t* positions,
                        const std::int32_t* types, std::int64_t N, int C, int pad_id) {
  CHECK(N >= 0 && C > 0, "N = ", N, ", C = ", C);
  CHECK(dtype == nullptr || types != nullptr, "a token-type gradient needs token types");
  detail::parallel_columns(N, C, [&](int c0, int c1) {
    for (std::int64_t r = 0; r < N; ++r) {
      const float* g = dout + r * C;
      if (ids[r] != pad_id) {
        float* dw = dword + static_cast<std::int64_t>(ids[r]) * C;
        for (int c = c0; c < c1; ++c) dw[c] += g[c];
      }
      if (dpos != nullptr) {
        float* dp = dpos + static_cast<std::int64_t>(positions[r]) * C;
        for (int c = c0; c < c1; ++c) dp[c] += g[c];
      }
      if (dtype != nullptr) {
        float* dt = dtype + static_cast<std::int64_t>(types[r]) * C;
        for (int c = c0; c < c1; ++c) dt[c] += g[c];
      }
    }
  });
}

}  // namespace bertfit
