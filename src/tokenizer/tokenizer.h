// BERT WordPiece tokenizer with Hugging Face BertTokenizer semantics: BasicTokenizer (clean
// text, CJK split, lowercase + strip accents for uncased, whitespace and punctuation split)
// then greedy longest-match WordPiece with "##" continuations; single and pair encoding with
// [CLS]/[SEP], token type ids, attention mask and longest_first truncation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bertfit {

struct Encoding {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;
  std::vector<std::int32_t> attention_mask;  // all ones (no padding is added here)
};

class WordPieceTokenizer {
 public:
  // vocab.txt: one token per line, id = line number. lowercase: do_lower_case (and strip
  // accents), as bert-base-uncased.
  static WordPieceTokenizer from_vocab_file(const std::string& path, bool lowercase = true);
  // HF tokenizers' tokenizer.json with a WordPiece model (the older format without
  // model.type is accepted); lowercase/strip_accents from its BertNormalizer.
  static WordPieceTokenizer from_tokenizer_json(const std::string& path);
  // A model folder: vocab.txt if present (do_lower_case from tokenizer_config.json, default
  // true), else tokenizer.json. Throws Error naming the folder if neither exists.
  static WordPieceTokenizer from_model_dir(const std::string& dir);

  // Ids of text without special tokens and without truncation.
  std::vector<std::int32_t> tokenize_ids(std::string_view text) const;

  // [CLS] a [SEP] (b [SEP]) truncated to max_len total tokens with HF's longest_first
  // strategy (remove one token at a time from the longer sequence, from b on ties).
  Encoding encode(std::string_view a, std::optional<std::string_view> b, int max_len) const;
  // The same from already tokenized ids (a, b without special tokens).
  Encoding encode_ids(std::vector<std::int32_t> a, std::optional<std::vector<std::int32_t>> b,
                      int max_len) const;

  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  std::int32_t cls_id() const { return cls_id_; }
  std::int32_t sep_id() const { return sep_id_; }
  std::int32_t pad_id() const { return pad_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  const std::string& token(std::int32_t id) const { return vocab_.at(id); }
  bool lowercase() const { return lowercase_; }

 private:
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, std::int32_t> ids_;
  bool lowercase_ = true;
  std::int32_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, unk_id_ = -1;
};

}  // namespace bertfit
