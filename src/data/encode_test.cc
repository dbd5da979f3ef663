// Tests of encode_examples: the parallel encoding equals encoding each example on its own with
// the tokenizer, labels are carried over, and a bad maximum length is a user error.
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/parallel.h"
#include "data/batch.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

const std::string kVocab = std::string(BERTFIT_SHARED_DIR) + "/data/vocab/bert-base-uncased.txt";

TEST(Encode, ParallelMatchesSequential) {
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(kVocab);
  std::vector<Example> examples;
  for (int i = 0; i < 300; ++i) {  // enough rows for several threads (64 per thread minimum)
    Example ex;
    ex.text_a = "Example number " + std::to_string(i) + " is a rather unremarkable sentence.";
    if (i % 3 == 0) ex.text_b = "And its partner, sentence " + std::to_string(i * 7) + "!";
    ex.label = static_cast<float>(i % 2);
    examples.push_back(ex);
  }
  set_num_threads(2);
  const int max_len = 12;  // forces truncation of most pairs
  std::vector<EncodedExample> encoded = encode_examples(tokenizer, examples, max_len);
  ASSERT_EQ(encoded.size(), examples.size());
  for (std::size_t i = 0; i < examples.size(); ++i) {
    std::optional<std::string_view> b;
    if (examples[i].text_b) b = *examples[i].text_b;
    Encoding expected = tokenizer.encode(examples[i].text_a, b, max_len);
    EXPECT_EQ(encoded[i].ids, expected.input_ids) << i;
    EXPECT_EQ(encoded[i].type_ids, expected.token_type_ids) << i;
    EXPECT_EQ(encoded[i].label, examples[i].label);
    EXPECT_LE(encoded[i].ids.size(), static_cast<std::size_t>(max_len));
    EXPECT_EQ(encoded[i].ids.front(), tokenizer.cls_id());
  }
  EXPECT_THROW(encode_examples(tokenizer, examples, 1), Error);
}

}  // namespace
}  // namespace bertfit
