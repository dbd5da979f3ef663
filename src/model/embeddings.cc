// The embeddings component, forward and backward (see embeddings.h for the formulas).
#include "model/embeddings.h"

#include <algorithm>

#include "kernels/kernels.h"
#include "model/family.h"

namespace bertfit {
namespace {

// Rows of padding tokens (row_sequence -1: only in padded execution) set to 0: DeBERTa's
// `embeddings * mask`, and the same on its gradient.
void zero_padding_rows(float* x, const Activations& a, std::int64_t E) {
  if (a.packed) return;
  for (std::int64_t r = 0; r < a.N; ++r) {
    if (a.row_sequence[r] < 0) std::fill_n(x + r * E, E, 0.0f);
  }
}

}  // namespace

bool Embeddings::projects(const ModelConfig& c) {
  return c.family->embeddings.projection != nullptr && c.embedding_dim() != c.hidden;
}

void Embeddings::resize(const ModelConfig& c, Activations& a, std::int64_t rows, bool training,
                        bool bf16) {
  const std::int64_t E = c.embedding_dim();
  grow(a.emb, rows * E);
  grow(a.emb_mean, rows);
  grow(a.emb_rstd, rows);
  if (!projects(c)) return;
  grow(a.emb_normed, rows * E);
  if (bf16) grow(a.emb_normed_bf16, rows * E);
  if (training) {
    grow(a.d_emb_normed, rows * E);
    grow(a.d_emb_sum, rows * E);
  }
}

void Embeddings::declare(const ModelConfig& c, LayoutBuilder& b) {
  const EmbeddingNames& n = c.family->embeddings;
  const std::string e = n.prefix;
  const std::int64_t E = c.embedding_dim();
  b.group();
  b.embedding(e + n.word + ".weight", Role::kWordEmb, c.vocab_size, E);
  if (c.absolute_positions) {
    b.embedding(e + n.position + ".weight", Role::kPosEmb, c.max_positions, E);
  }
  if (c.token_types()) {
    b.embedding(e + n.token_type + ".weight", Role::kTypeEmb, c.type_vocab_size, E);
  }
  b.layer_norm(e + n.layer_norm, Role::kEmbLnW, E, c.structure.norm_bias);
  if (projects(c)) b.linear(n.projection, Role::kProjW, c.hidden, E, /*quantized=*/false);
}

void Embeddings::forward(const LayerRun& run, Activations& a) const {
  const ModelConfig& c = w_.config();
  const bool types = c.token_types(), project = projects(c);
  const std::int64_t N = a.N, E = c.embedding_dim();
  embedding_forward(a.emb.data(), a.ids.data(), a.positions.data(),
                    types ? a.types.data() : nullptr, w_(Role::kWordEmb),
                    c.absolute_positions ? w_(Role::kPosEmb) : nullptr,
                    types ? w_(Role::kTypeEmb) : nullptr, N, E);
  float* normed = project ? a.emb_normed.data() : a.embedded();
  layernorm_forward(normed, a.emb_mean.data(), a.emb_rstd.data(), a.emb.data(), w_(Role::kEmbLnW),
                    w_.maybe(Role::kEmbLnB), N, E, static_cast<float>(c.layer_norm_eps));
  if (c.family->masks_padding_rows) zero_padding_rows(normed, a, E);
  dropout_forward(normed, normed, N * E, run.p_embed,
                  dropout_key(*run.dropout, 0, kSiteEmbeddings));
  if (project) w_.linear(Role::kProjW).forward(Rows{a.embedded()}, a.emb_normed_rows(), N);
}

void Embeddings::backward(const LayerRun& run, float* grads, Activations& a,
                          GradsReady& ready) const {
  const ModelConfig& c = w_.config();
  const ParamLayout& lay = w_.layout();
  const bool types = c.token_types(), project = projects(c);
  const std::int64_t N = a.N, E = c.embedding_dim();
  auto G = [&](Role r) { return grads + lay.offset(r); };
  // d(LN output): d_out itself, or the projection's input gradient.
  float* d_normed = a.d_out.data();
  if (project) {
    d_normed = a.d_emb_normed.data();
    w_.linear(Role::kProjW)
        .backward(d_normed, Output::kOverwrite, G(Role::kProjW), G(Role::kProjB), a.d_out.data(),
                  a.emb_normed_rows(), LinearScratch{a.dy_scratch()}, N);
  }
  float* d_sum = project ? a.d_emb_sum.data() : a.d_in.data();
  dropout_backward(d_normed, d_normed, N * E, run.p_embed,
                   dropout_key(*run.dropout, 0, kSiteEmbeddings));
  if (c.family->masks_padding_rows) zero_padding_rows(d_normed, a, E);
  layernorm_backward(d_sum, G(Role::kEmbLnW), lay.has(Role::kEmbLnB) ? G(Role::kEmbLnB) : nullptr,
                     d_normed, a.emb.data(), w_(Role::kEmbLnW), a.emb_mean.data(),
                     a.emb_rstd.data(), N, E);
  embedding_backward(G(Role::kWordEmb), c.absolute_positions ? G(Role::kPosEmb) : nullptr,
                     types ? G(Role::kTypeEmb) : nullptr, d_sum, a.ids.data(), a.positions.data(),
                     types ? a.types.data() : nullptr, N, E, c.pad_token_id);
  ready.done();
}

}  // namespace bertfit
