// Tests of make_batch: dynamic padding (rounded to a multiple), fixed length, the padding
// values, labels and example indices, row-major layout.
#include "data/batch.h"

#include <gtest/gtest.h>

namespace bertfit {
namespace {

std::vector<EncodedExample> three_examples() {
  return {{{101, 7, 102}, {0, 0, 0}, 1.0f, {0, 2}},
          {{101, 8, 9, 10, 102, 11, 102}, {0, 0, 0, 0, 0, 1, 1}, 0.0f, {}},
          {{101, 102}, {0, 0}, 2.5f, {1}}};
}

TEST(Batch, MultiLabelRowsAreMultiHot) {
  BatchOptions options;
  options.multi_label_classes = 3;
  const std::vector<std::int64_t> order = {2, 0, 1};
  Batch b = make_batch(three_examples(), order, options);
  EXPECT_EQ(b.labels, (std::vector<float>{0, 1, 0, 1, 0, 1, 0, 0, 0}));
}

TEST(Batch, DynamicPaddingRoundsUp) {
  auto encoded = three_examples();
  std::vector<std::int64_t> idx = {2, 0};
  Batch b = make_batch(encoded, idx);  // longest 3 -> 8
  EXPECT_EQ(b.B, 2);
  EXPECT_EQ(b.T, 8);
  EXPECT_EQ(b.input_ids, (std::vector<std::int32_t>{101, 102, 0, 0, 0, 0, 0, 0,  //
                                                    101, 7, 102, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.attention_mask, (std::vector<std::int32_t>{1, 1, 0, 0, 0, 0, 0, 0,  //
                                                         1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.token_type_ids, std::vector<std::int32_t>(16, 0));
  EXPECT_EQ(b.labels, (std::vector<float>{2.5f, 1.0f}));
  EXPECT_EQ(b.example_index, idx);
}

TEST(Batch, NoRoundingAndPairTypes) {
  auto encoded = three_examples();
  std::vector<std::int64_t> idx = {1, 2};
  BatchOptions options;
  options.pad_to_multiple_of = 1;
  Batch b = make_batch(encoded, idx, options);
  EXPECT_EQ(b.T, 7);
  EXPECT_EQ(b.token_type_ids, (std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1,  //
                                                         0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.input_ids[7], 101);
  EXPECT_EQ(b.input_ids[9], 0);
  options.pad_to_multiple_of = 4;
  EXPECT_EQ(make_batch(encoded, idx, options).T, 8);
  std::vector<std::int64_t> one = {2};
  EXPECT_EQ(make_batch(encoded, one, options).T, 4);
}

TEST(Batch, FixedLength) {
  auto encoded = three_examples();
  std::vector<std::int64_t> idx = {0, 1, 2};
  BatchOptions options;
  options.fixed_len = 12;
  Batch b = make_batch(encoded, idx, options);
  EXPECT_EQ(b.T, 12);
  EXPECT_EQ(b.input_ids.size(), 36u);
  int mask_sum = 0;
  for (int m : b.attention_mask) mask_sum += m;
  EXPECT_EQ(mask_sum, 3 + 7 + 2);
  EXPECT_EQ(b.attention_mask[12 + 6], 1);
  EXPECT_EQ(b.attention_mask[12 + 7], 0);
}

}  // namespace
}  // namespace bertfit
