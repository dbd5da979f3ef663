// A small model for tests: the architecture's every code path (several heads and layers, an
// FFN wider than the hidden size) at a size whose forward and backward take milliseconds.
#pragma once

#include <algorithm>

#include "model/config.h"
#include "model/family.h"

namespace bertfit {

inline ModelConfig small_test_config(const ModelFamily& arch, int num_labels) {
  ModelConfig c = ModelConfig::defaults(arch);
  c.vocab_size = 200;
  c.hidden = 64;
  c.heads = 4;
  c.intermediate = 128;
  c.layers = 2;
  c.max_positions = 64;
  c.num_labels = num_labels;
  c.pad_token_id = std::min(c.pad_token_id, c.vocab_size - 1);  // ModernBERT's is 50283
  return c;
}

}  // namespace bertfit
