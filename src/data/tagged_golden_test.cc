// Golden checks of tagged-data encoding against transformers 4.28.1:
//  - ../shared/golden/{bert,roberta}-tokcls-tiny/batch.json: the words and tags of 8 CoNLL
//    sentences encoded with the model folder's tokenizer and id2label at seq_len reproduce the
//    batch's input_ids, attention_mask, token_type_ids and labels (-100 on non-first sub-tokens,
//    specials and padding) exactly; the cut words are those without a label.
//  - ../shared/golden/tokenizer-families/{roberta-bpe,spm}-conll-valid.jsonl: read_conll of
//    ../shared/data/conll2003/valid.txt gives the rows' words in order, and every sentence's
//    encoding is the template around the rows' per-word ids (is_split_into_words=True), with
//    each tag on its word's first sub-token; cut at 32 tokens it keeps the whole words that fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "data/batch.h"
#include "data/tagged.h"

namespace bertfit {
namespace {

const std::string kShared = BERTFIT_SHARED_DIR;
using Ids = std::vector<std::int32_t>;

void check_tokcls_batch(const std::string& model) {
  const std::string dir = kShared + "/golden/" + model;
  const auto batch = nlohmann::json::parse(read_file(dir + "/batch.json"));
  const auto golden = nlohmann::json::parse(read_file(dir + "/golden.json"));
  const auto config = nlohmann::json::parse(read_file(dir + "/model/config.json"));
  std::vector<std::string> id2label(config["id2label"].size());
  for (auto it = config["id2label"].begin(); it != config["id2label"].end(); ++it) {
    id2label.at(std::stoul(it.key())) = it.value().get<std::string>();
  }
  const int seq_len = golden["seq_len"];
  LoadedTagged data;
  data.path = dir + "/batch.json";
  for (std::size_t i = 0; i < batch["words"].size(); ++i) {
    data.sentences.push_back({batch["words"][i].get<std::vector<std::string>>(),
                              batch["word_tags"][i].get<std::vector<std::string>>(),
                              static_cast<std::int64_t>(i + 1)});
  }
  const auto tokenizer = load_tokenizer(dir + "/model");
  const auto encoded = encode_tagged(*tokenizer, data, id2label, seq_len);
  std::vector<std::int64_t> order(encoded.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  BatchOptions options;
  options.fixed_len = seq_len;
  options.token_labels = true;
  options.pad_id = tokenizer->pad_id();
  const Batch b = make_batch(encoded, order, options);
  auto flat = [](const nlohmann::json& rows) {
    std::vector<std::int32_t> out;
    for (const auto& row : rows)
      for (const auto& v : row) out.push_back(v.get<std::int32_t>());
    return out;
  };
  EXPECT_EQ(b.input_ids, flat(batch["input_ids"])) << model;
  EXPECT_EQ(b.attention_mask, flat(batch["attention_mask"])) << model;
  EXPECT_EQ(b.token_type_ids, flat(batch["token_type_ids"])) << model;
  const Ids labels = flat(batch["labels"]);
  ASSERT_EQ(b.labels.size(), labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(b.labels[i], static_cast<float>(labels[i])) << model << " cell " << i;
  }
  // Every golden word has sub-tokens, so the words without a label are the cut ones.
  std::int64_t cut = 0;
  for (std::size_t r = 0; r < encoded.size(); ++r) {
    std::int64_t labelled = 0;
    for (int t = 0; t < seq_len; ++t) labelled += labels[r * seq_len + t] != -100 ? 1 : 0;
    const auto words = static_cast<std::int64_t>(data.sentences[r].words.size());
    EXPECT_EQ(encoded[r].truncated_words, words - labelled) << model << " row " << r;
    cut += words - labelled;
  }
  EXPECT_GT(cut, 0) << model << ": the batch should exercise truncation";
}

TEST(TaggedGolden, BertTokenClassificationBatch) { check_tokcls_batch("bert-tokcls-tiny"); }
TEST(TaggedGolden, RobertaTokenClassificationBatch) { check_tokcls_batch("roberta-tokcls-tiny"); }

// Returns the number of sentences checked.
int check_conll_family(const std::string& tokenizer_dir, const std::string& golden_file) {
  const LoadedTagged data = read_conll(kShared + "/data/conll2003/valid.txt");
  const auto tokenizer = load_tokenizer(tokenizer_dir);
  constexpr int kShort = 32;
  const auto full = encode_tagged(*tokenizer, data, data.tag_names, 1024);
  const auto cut = encode_tagged(*tokenizer, data, data.tag_names, kShort);
  std::ifstream in(golden_file);
  EXPECT_TRUE(in) << golden_file;
  std::string line;
  std::size_t row = 0;
  int failures = 0;
  while (std::getline(in, line) && failures < 5) {
    if (line.empty()) continue;
    const auto golden = nlohmann::json::parse(line);
    if (row >= data.sentences.size()) {
      ADD_FAILURE() << "more golden rows than sentences";
      break;
    }
    const TaggedSentence& s = data.sentences[row];
    const auto words_ids = golden["words_ids"].get<std::vector<Ids>>();
    Ids ids = {tokenizer->cls_id()}, labels = {-100}, word_ids = {-1};
    Ids short_ids = ids;
    std::int64_t short_cut = 0;
    for (std::size_t w = 0; w < words_ids.size(); ++w) {
      const auto tag = std::find(data.tag_names.begin(), data.tag_names.end(), s.tags[w]);
      for (std::size_t k = 0; k < words_ids[w].size(); ++k) {
        ids.push_back(words_ids[w][k]);
        labels.push_back(k == 0 ? static_cast<std::int32_t>(tag - data.tag_names.begin()) : -100);
        word_ids.push_back(static_cast<std::int32_t>(w));
      }
      const bool fits = short_cut == 0 && short_ids.size() + words_ids[w].size() <= kShort - 1;
      if (fits) {
        short_ids.insert(short_ids.end(), words_ids[w].begin(), words_ids[w].end());
      } else {
        ++short_cut;
      }
    }
    ids.push_back(tokenizer->sep_id());
    labels.push_back(-100);
    word_ids.push_back(-1);
    short_ids.push_back(tokenizer->sep_id());
    const std::string where = golden_file + " row " + std::to_string(row);
    const bool ok = s.words == golden["words"].get<std::vector<std::string>>() &&
                    full[row].ids == ids && full[row].token_labels == labels &&
                    full[row].word_ids == word_ids && full[row].truncated_words == 0 &&
                    cut[row].ids == short_ids && cut[row].truncated_words == short_cut;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << where << ": words, ids, labels, word ids or the cut differ\n  want "
                    << nlohmann::json(ids).dump() << "\n  got  "
                    << nlohmann::json(full[row].ids).dump();
    }
    ++row;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(row, data.sentences.size());
  return static_cast<int>(row);
}

TEST(TaggedGolden, RobertaBpeConllValid) {
  EXPECT_EQ(
      check_conll_family(kShared + "/data/roberta-bpe",
                         kShared + "/golden/tokenizer-families/roberta-bpe-conll-valid.jsonl"),
      3250);
}

TEST(TaggedGolden, SentencePieceConllValid) {
  EXPECT_EQ(check_conll_family(kShared + "/data/spm",
                               kShared + "/golden/tokenizer-families/spm-conll-valid.jsonl"),
            3250);
}

}  // namespace
}  // namespace bertfit
