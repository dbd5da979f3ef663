// Parallel encoding of examples into token ids (encode_examples of batch.h), kept apart from
// batch packing so that packing does not pull in the tokenizer.
#include <exception>
#include <mutex>
#include <string>

#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"

namespace bertfit {

std::vector<EncodedExample> encode_examples(const Tokenizer& tokenizer,
                                            const std::vector<Example>& examples, int max_len) {
  if (max_len < 2) throw_error("maximum sequence length must be at least 2, got ", max_len);
  std::vector<EncodedExample> out(examples.size());
  // No exception may leave the parallel region: the first failure (lowest index) is kept and
  // rethrown after the loop.
  std::mutex mutex;
  std::int64_t failed_index = -1;
  std::string failure;
  const auto n = static_cast<std::int64_t>(examples.size());
  parallel_for(n, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const Example& ex = examples[i];
      try {
        std::optional<std::string_view> b;
        if (ex.text_b) b = *ex.text_b;
        Encoding enc = tokenizer.encode(ex.text_a, b, max_len);
        out[i].ids = std::move(enc.input_ids);
        out[i].type_ids = std::move(enc.token_type_ids);
        out[i].label = ex.label;
        out[i].label_ids = ex.label_ids;
        out[i].truncated_tokens = enc.truncated_tokens;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (failed_index < 0 || i < failed_index) {
          failed_index = i;
          failure = e.what();
        }
        return;
      }
    }
  });
  if (failed_index >= 0) {
    throw_error("cannot encode example ", failed_index, " (line ", examples[failed_index].line,
                "): ", failure);
  }
  return out;
}

Truncation count_truncation(const std::vector<EncodedExample>& encoded) {
  Truncation t;
  for (const EncodedExample& e : encoded) {
    t.rows += e.truncated_tokens > 0 ? 1 : 0;
    t.tokens += e.truncated_tokens;
  }
  return t;
}

}  // namespace bertfit
