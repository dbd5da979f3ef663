// Activations: every tensor the forward pass saves for the backward pass, plus the backward
// pass's scratch, sized for B·T token rows and grown (never shrunk) as batches demand.
// Letters: N rows, B batch, T tokens, C channels, H heads, I intermediate, K labels.
//
// Token rows. Padded execution: N = B·T, row b·T + t is token t of sequence b. Unpadded
// (packed) execution: N = the number of real tokens, in (b, t) order, and only attention sees
// the padded (B,T) layout: its input qkv and output att are unpacked/packed in place around it,
// so layer.qkv (qkv_bf16) holds (B·T,3C) and every other (N,·) tensor only the real tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "kernels/rotary.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/precision.h"

namespace bertfit {

// Grows b to n elements, keeping a larger one: how Activations::resize and the components that
// size their own buffers (Embeddings::resize, Head::resize) grow them.
template <class T>
void grow(AlignedBuffer<T>& b, std::int64_t n) {
  if (static_cast<std::int64_t>(b.size()) < n) b.resize(n);
}

// What the forward saves for one encoder layer.
struct LayerActivations {
  AlignedBuffer<float> qkv;           // (N,3C) fused q|k|v projections (fp32; int8: in ff1's
                                      // buffer instead when attention reads qkv_bf16)
  AlignedBuffer<float> probs;         // (B,H,T,T) attention probabilities before dropout (plain
                                      // attention; none with blockwise attention)
  AlignedBuffer<float> lse;           // (B,H,T) blockwise attention: each query row's
                                      // log-sum-exp of its scores (kernels/attention_blockwise.h)
  AlignedBuffer<float> att_padded;    // (B·T,C) blockwise attention in bf16 training: the
                                      // attention output in the padded layout (its backward's O)
  AlignedBuffer<float> att;           // (N,C) attention output, heads concatenated (fp32 only)
  AlignedBuffer<float> res1;          // (N,C) x + dropout(att·Woᵀ + bo): input of LayerNorm 1
  AlignedBuffer<float> mean1, rstd1;  // (N)
  AlignedBuffer<float> h1;            // (N,C) LayerNorm 1 output (fp32 only)
  AlignedBuffer<float> ff1;           // (N,I) h1·W1ᵀ + b1: activation input (fp32 only)
  AlignedBuffer<float> act;           // (N,I) activation output (fp32 only; bf16 keeps act_bf16;
                                      // training only: inference writes it over ff1)
  AlignedBuffer<float> res2;          // (N,C) h1 + dropout(act·W2ᵀ + b2): input of LayerNorm 2
  AlignedBuffer<float> mean2, rstd2;  // (N)
  AlignedBuffer<float> normed;        // (N,C) pre-norm layers: the attention norm's output
  AlignedBuffer<float> out;           // (N,C) LayerNorm 2 output = next layer's input (fp32, or
                                      // bf16 keeping hidden states)
  // bf16 precision only: the bf16 copies of the four products' inputs, saved for dW.
  AlignedBuffer<std::uint16_t> x_bf16;    // (N,C) layer input
  AlignedBuffer<std::uint16_t> att_bf16;  // (N,C)
  AlignedBuffer<std::uint16_t> h1_bf16;   // (N,C)
  AlignedBuffer<std::uint16_t> act_bf16;  // (N,I)
  AlignedBuffer<std::uint16_t> ff1_bf16;  // (N,I) ff1, the product's output rounded once; after
                                          // a training forward, act'(ff1) in its place
  AlignedBuffer<std::uint16_t> qkv_bf16;  // (N,3C) qkv, the same (int8 too, on a CPU with
                                          // native bf16: attention's operand)
};

// Whether the config's layers run blockwise attention (kernels/attention_blockwise.h: no T × T
// buffer, the per-row log-sum-exp kept for backward instead of the probabilities): the
// rotary (ModernBERT) layers, whose inputs reach 8,192 tokens.
bool blockwise_attention(const ModelConfig& config);

// What a head keeps (model/head.h): R rows, B for heads on the first tokens. Each head uses the
// buffers its formula needs.
struct HeadActivations {
  AlignedBuffer<float> x;     // (R,C) the last layer's rows the head reads (after its dropout)
  AlignedBuffer<float> pre;   // (R,C) the dense product's output (the activation's input)
  AlignedBuffer<float> act;   // (R,C) the activation's output
  AlignedBuffer<float> drop;  // (R,C) the same after dropout: the output product's input
  AlignedBuffer<float> d_x, d_pre, d_act;  // (R,C) backward
  // A norm after the activation (ModernBERT's head.norm): its output, statistics, gradient.
  AlignedBuffer<float> normed, mean, rstd, d_normed;  // (R,C), (R), (R), (R,C)
  AlignedBuffer<std::uint16_t> x_bf16, drop_bf16;     // (R,C) bf16: the products' inputs
  AlignedBuffer<float> out, d_out;  // (R,K) outputs per row before they are laid out as logits
  // Pooling: per (sequence, channel) the row max pooling took; per sequence its real tokens,
  // its last real row, and the pooled vector's norm (Normalize).
  std::vector<std::int64_t> max_rows, last_rows;
  std::vector<float> counts, norms;
  // The embedding head's Dense modules: per module (B,out) its product W x + b and its output
  // act(W x + b), the next module's input (the first's is `out`, the pooled vectors).
  std::vector<std::vector<float>> dense_pre, dense_y;
};

// The position id of every token of a padded (B,T) batch of ids, by the family's rule
// (model/family.h): t, or RoBERTa's count of non-padding tokens up to t plus pad_token_id
// (padding: pad_token_id).
std::vector<std::int32_t> position_ids(const ModelConfig& config, const std::int32_t* input_ids,
                                       int B, int T);

struct Activations {
  int B = 0, T = 0;
  std::int64_t N = 0;                    // token rows in use (see the top)
  bool packed = false;                   // unpadded execution: N < B·T real tokens
  std::vector<std::int64_t> token_rows;  // packed: (N) padded row b·T + t of each row
  std::vector<std::int32_t> ids, types;  // (N) token id and token type id of each row
  std::vector<std::int32_t> positions;   // (N) position id of each row
  // Embeddings (model/embeddings.h, which sizes them), E the embedding size (= C unless
  // projected).
  AlignedBuffer<float> emb;                 // (N,E) word + position (+ type) embeddings
  AlignedBuffer<float> emb_mean, emb_rstd;  // (N)
  AlignedBuffer<float> emb_normed;          // (N,E) after LayerNorm and dropout, when projected
  AlignedBuffer<std::uint16_t> emb_normed_bf16;  // (N,E) bf16: the projection's input
  AlignedBuffer<float> d_emb_normed, d_emb_sum;  // (N,E) backward, when projected
  AlignedBuffer<float> x0;               // (N,C) the embeddings' output (the first layer's input)
  std::vector<LayerActivations> layers;  // (L)
  // Relative positions (model/relative_positions.h), P rows: the normalized table, each layer's
  // projections [pq | pk] (one buffer per layer when training, else one for all), the dropped
  // table per layer (training), the gradients, and the rows of each distance for this T.
  AlignedBuffer<float> rel, rel_mean, rel_rstd;          // (P,C), (P), (P)
  std::vector<AlignedBuffer<float>> rel_pos;             // (P,2C) each
  std::vector<AlignedBuffer<float>> rel_drop;            // (P,C) each
  AlignedBuffer<float> d_rel, d_rel_in, d_rel_pos;       // (P,C), (P,C), (P,2C)
  std::vector<std::int32_t> rel_c2p_rows, rel_p2c_rows;  // (2T-1)
  float* rel_pos_of(int l) {
    return rel_pos[rel_pos.size() > static_cast<std::size_t>(l) ? l : 0].data();
  }
  float* rel_drop_of(int l) { return rel_drop[l].data(); }
  // Rotary tables (kernels/rotary.h) made so far, one per base and head size, grown to the
  // longest T seen (a table serves every shorter T).
  std::vector<RotaryTable> rotary_tables;
  std::vector<std::int64_t> cls_rows;      // (B) row of each sequence's first token
  std::vector<std::int32_t> row_sequence;  // (N) each row's sequence; -1 for a padding row
  // The last forward kept what backward needs (ModelInput::for_backward or dropout training).
  bool for_backward = false;
  // Last layer on first tokens only (ModelInput::full_last_layer false): its rows after
  // attention are the B first tokens, in sequence order.
  bool cls_only = false;
  std::vector<std::int64_t> first_rows;  // (B) padded row b·T of each sequence's first token
  AlignedBuffer<float> first_x;          // (B,C) the last layer's input at those rows
  // Pre-norm families' final norm (model/final_norm.h): its output, what the head reads.
  AlignedBuffer<float> final_out, final_mean, final_rstd;  // (N,C), (N), (N)
  HeadActivations head;                                    // sized by the head (model/head.h)
  // The head's outputs: (B,K) for a sequence head, (B·T,K) in the padded layout for a token
  // head (padding rows 0); probs and dlogits alike.
  AlignedBuffer<float> logits;
  AlignedBuffer<float> probs;    // softmax of logits (classification)
  AlignedBuffer<float> dlogits;  // gradient of the loss w.r.t. the logits

  // Backward scratch, reused by every layer.
  AlignedBuffer<float> d_out, d_in;              // (N,C) gradient w.r.t. a layer's output / input
  AlignedBuffer<float> d_ff2;                    // (N,C)
  AlignedBuffer<float> d_act, d_ff1;             // (N,I) fp32 only
  AlignedBuffer<float> d_h1, d_att_proj, d_att;  // (N,C); d_att_proj: with attention output dropout
  AlignedBuffer<float> d_qkv;                    // (N,3C)

  // bf16 precision only: the bf16 copy of an output gradient.
  // fp32 tensors that backward never reads live in buffers shared by all layers instead of one
  // per layer: the hidden state (x0, then each layer's out, unless hidden states are kept; in
  // bf16 also each layer's h1) and, in bf16, the attention output. -13 MB per layer and tensor
  // at batch 32, seq 128 (DistilBERT).
  AlignedBuffer<float> shared_hidden, shared_att;  // (N,C)
  AlignedBuffer<std::uint16_t> dy_bf16;            // (N, max(3C, I))
  AlignedBuffer<std::uint16_t> d_act_bf16;         // (N,I) the activation output's gradient

  // int8 only: the quantized form of a product's input, made by the kernel before the product
  // (EncoderLayer::forward): C-wide rows for h1 and every layer's input after the first, I-wide
  // rows for the activation output. Two slots, because a product reads its input in blocks of
  // rows while its epilogue quantizes the next product's input block by block: h1 -> act ->
  // next input alternate between them.
  struct QuantizedSlot {
    AlignedBuffer<std::uint8_t> q;
    AlignedBuffer<float> scale;
    AlignedBuffer<std::int32_t> zero;
    QuantizedRows rows() { return {q.data(), scale.data(), zero.data()}; }
  };
  QuantizedSlot q8_hidden, q8_inner;

  // Sizes every buffer for B sequences of T tokens; keeps larger existing buffers. bf16 adds
  // the bf16 copies, int8 the quantized slots. The embeddings' and the head's buffers are sized
  // by their components (Embeddings::resize, Head::resize).
  // keep_hidden: x0 and every layer's out get their own buffers, so hidden(l) is valid after
  // the forward (fp32 training needs them: its backward reads each layer's input).
  // A forward that is neither for training nor keeps hidden states (inference) runs every layer
  // on layers[0]'s buffers (layer(l)) and the hidden state in place in shared_hidden: one
  // layer's tensors instead of L (-5/6 of the activation memory for DistilBERT).
  void resize(const ModelConfig& config, int B, int T, bool for_training,
              Precision precision = Precision::kF32, bool keep_hidden = false);
  // The buffers layer l uses in the last resize()'s form: layers[l], or layers[0] for all.
  LayerActivations& layer(int l) { return layers[share_layers_now_ ? 0 : l]; }

  // Chooses the token rows for a batch after resize(): packed when `unpadded` and the mask
  // has padding (mask may be null: no padding), else padded. Fills N, packed, token_rows, ids,
  // types (zeros when null), positions (by the config's family rule, model/family.h) and
  // cls_rows, row_sequence. Every sequence must start with a real token (its [CLS]).
  void layout_tokens(const ModelConfig& config, const std::int32_t* input_ids,
                     const std::int32_t* token_type_ids, const std::int32_t* attention_mask,
                     bool unpadded);

  // Hidden state after layer l (0 = embeddings output), (N,C); after the last layer only B rows
  // (the first tokens) unless the forward ran with ModelInput::full_last_layer. Valid after a
  // forward that kept hidden states (resize's keep_hidden).
  const float* hidden(int l) const { return l == 0 ? x0.data() : layers[l - 1].out.data(); }

  // The tensors as the precision of the last resize() stores them (Rows, model/linear.h): what
  // the layer code hands to the ops, which read the form their precision uses.
  float* embedded();        // (N,C) x0: own buffer in fp32 or keeping hidden states, else shared
  float* layer_out(int l);  // (N,C) layer l's output, as embedded()
  // What the head reads: the last layer's output, or in pre-norm families its final norm's.
  float* encoder_out(const ModelConfig& config);
  Rows layer_in(int l);    // the layer's input (embedded() or layer_out(l-1)), + bf16 slot
                           // (int8: + the quantized slot for l > 0)
  Rows qkv(int l);         // fp32, or bf16 alone (int8 with native bf16: both, see resize)
  Rows att(int l);         // fp32 (bf16: shared) + bf16 slot
  Rows h1(int l);          // fp32 (bf16: shared) + bf16 slot (int8: + the quantized slot)
  Rows ff1(int l);         // fp32, or bf16 alone
  Rows act(int l);         // fp32 (int8: + the quantized slot), or bf16 alone; an inference
                           // forward's is ff1's buffer (the activation runs in place)
  Rows emb_normed_rows();  // (N,E) emb_normed + bf16 slot: the embedding projection's input
  Rows d_act_rows();       // (N,I) gradient w.r.t. the activation's output: fp32, or bf16 alone
  std::uint16_t* dy_scratch() { return bf16_now_ ? dy_bf16.data() : nullptr; }
  bool bf16_now() const { return bf16_now_; }  // the last resize()'s precision is bf16

 private:
  std::int64_t capacity_rows_ = 0;
  std::int64_t f32_rows_ = 0;     // rows of qkv, att, h1, ff1, act (allocated in fp32 only)
  std::int64_t hidden_rows_ = 0;  // rows of x0 and out (kept hidden states)
  std::int64_t shared_rows_ = 0;  // rows of shared_hidden
  std::int64_t capacity_attn_ = 0;
  int capacity_batch_ = 0;
  bool training_ = false;
  bool bf16_ = false;
  bool int8_ = false;
  bool qkv16_ = false;           // layers' qkv_bf16 allocated
  std::int64_t qkv32_rows_ = 0;  // rows of the layers' fp32 qkv
  bool all_layers_ = false;      // every layer's buffers hold the capacity (else only layers[0]'s)
  bool gated_now_ = false;       // the FFN is gated: act never overwrites ff1
  bool bf16_now_ = false, int8_now_ = false, training_now_ = false, qkv16_now_ = false,
       qkv_in_ff1_now_ = false, keep_hidden_now_ = true,
       share_layers_now_ = false;                // last resize()'s
  QuantizedRows quantized(QuantizedSlot& slot);  // int8: slot's rows, else empty
};

}  // namespace bertfit
