// The matrix's families and the tokenizers it writes for them (see matrix_families.h).
//
// WordPiece: [PAD] [UNK] [CLS] [SEP] [MASK] tok5 .. tok59, the words "tok5" .. "tok59".
// Byte-level BPE and SentencePiece share one layout of 58 ids, RoBERTa's and XLM-R's specials
// first: <s>=0 <pad>=1 </s>=2 <unk>=3, then the space marker (Ġ, ▁) 4, the letters a..z 5..30
// and the marked letters Ġa..Ġz / ▁a..▁z 31..56 (a letter after a space), <mask>=57. A word is
// one letter, with or without a space before it: "qz w" is q z Ġw in byte-level BPE (its first
// word has no space before it) and ▁q z ▁w in SentencePiece (whose dummy prefix puts one before
// the first).
//   byte-level BPE: vocab.json with those ids and merges.txt with the merges "Ġ a" .. "Ġ z";
//   SentencePiece: a BPE ModelProto (sentencepiece.bpe.model) written here in the protobuf wire
//   format: spm ids <unk>=0 <s>=1 </s>=2 ▁=3 a..z=4..29 ▁a..▁z=30..55, which XLM-R's fairseq
//   mapping (spm id + 1, <mask> after the last) turns into the layout above;
//   DeBERTa's SentencePiece: spm.model with the model's own [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3
//   pieces first (its ids are the spm ids), [MASK]=57 in added_tokens.json.
// A pre-split word (token classification) is tokenized alone with a space before it (byte-level
// BPE's add_prefix_space, SentencePiece's dummy prefix): "qz" is Ġq z / ▁q z, a marked letter
// then unmarked ones.
#include "matrix_families.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

std::string wordpiece_text(int id) { return " tok" + std::to_string(id); }

std::string write_wordpiece(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < 60; ++i) vocab += "tok" + std::to_string(i) + "\n";
  write_text(dir + "/vocab.txt", vocab);
  return dir + "/vocab.txt";
}

constexpr int kFirstLetter = 5, kFirstMarked = 31, kLetterMask = 57;

std::string letter(int id) {
  return std::string(
      1, static_cast<char>('a' + (id < kFirstMarked ? id - kFirstLetter : id - kFirstMarked)));
}
// A word's token in the vocabulary file: the letter, after the marker if marked.
std::string token(int id, const std::string& marker) {
  std::string t = id < kFirstMarked ? std::string() : marker;
  t += letter(id);
  return t;
}
std::string letter_text(int id) { return token(id, " "); }

std::string write_byte_level_bpe(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string g = "\xC4\xA0";  // Ġ, byte-level BPE's space
  std::string vocab = R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, ")" + g + R"(": 4)";
  std::string merges = "#version: 0.2\n";
  for (int id = kFirstLetter; id < kLetterMask; ++id) {
    vocab += ", \"" + token(id, g) + "\": " + std::to_string(id);
    if (id >= kFirstMarked) merges += g + " " + letter(id) + "\n";
  }
  vocab += R"(, "<mask>": )" + std::to_string(kLetterMask) + "}";
  write_text(dir + "/vocab.json", vocab);
  write_text(dir + "/merges.txt", merges);
  return dir;
}

// The protobuf wire format, as much as a SentencePiece ModelProto needs.
void varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}
void varint_field(std::string& out, int field, std::uint64_t v) {
  varint(out, static_cast<std::uint64_t>(field) << 3);
  varint(out, v);
}
void bytes_field(std::string& out, int field, const std::string& bytes) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}
void float_field(std::string& out, int field, float f) {
  varint(out, static_cast<std::uint64_t>(field) << 3 | 5);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  for (int i = 0; i < 4; ++i) out += static_cast<char>(bits >> (8 * i) & 0xff);
}

// A BPE ModelProto over the pieces `specials` (with their types), then ▁ and the letters.
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3 };
std::string sentencepiece_model(const std::vector<std::pair<std::string, PieceType>>& specials) {
  std::string model;
  int pieces = 0;
  auto piece = [&](const std::string& text, PieceType type) {
    std::string p;  // SentencePiece: piece = 1, score = 2, type = 3
    bytes_field(p, 1, text);
    float_field(p, 2, -static_cast<float>(pieces++));  // any: each word has one possible merge
    varint_field(p, 3, type);
    bytes_field(model, 1, p);  // ModelProto.pieces = 1
  };
  const std::string space = "\xE2\x96\x81";  // ▁, SentencePiece's space
  for (const auto& [text, type] : specials) piece(text, type);
  piece(space, kNormal);
  for (int id = kFirstLetter; id < kLetterMask; ++id) piece(token(id, space), kNormal);
  std::string trainer;  // TrainerSpec.model_type = 3: BPE = 2
  varint_field(trainer, 3, 2);
  bytes_field(model, 2, trainer);
  std::string normalizer;                  // NormalizerSpec: name = 1, add_dummy_prefix = 3,
  bytes_field(normalizer, 1, "identity");  // remove_extra_whitespaces = 4, escape_whitespaces = 5
  for (int field : {3, 4, 5}) varint_field(normalizer, field, 1);
  bytes_field(model, 3, normalizer);
  return model;
}

std::string write_sentencepiece(const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_text(dir + "/sentencepiece.bpe.model",
             sentencepiece_model({{"<unk>", kUnknown}, {"<s>", kControl}, {"</s>", kControl}}));
  return dir;
}

// DeBERTa-v3's convention: the model's own [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3 pieces, then ▁ 4 and
// the letters as above; [MASK]=57 from added_tokens.json.
std::string write_deberta_sentencepiece(const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_text(
      dir + "/spm.model",
      sentencepiece_model(
          {{"[PAD]", kControl}, {"[CLS]", kControl}, {"[SEP]", kControl}, {"[UNK]", kUnknown}}));
  write_text(dir + "/added_tokens.json", R"({"[MASK]": 57})");
  write_text(dir + "/tokenizer_config.json",
             R"({"tokenizer_class": "DebertaV2Tokenizer", "do_lower_case": false,)"
             R"( "split_by_punct": false, "bos_token": "[CLS]", "eos_token": "[SEP]",)"
             R"( "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]",)"
             R"( "unk_token": "[UNK]", "mask_token": "[MASK]"})");
  return dir;
}

const MatrixVocabulary kWordPiece{.cls = 2,
                                  .sep = 3,
                                  .pad = 0,
                                  .size = 60,
                                  .first_lo = 5,
                                  .first_hi = 59,
                                  .word_lo = 5,
                                  .word_hi = 59,
                                  .split_lo = 5,  // "tok17" alone is tok17; no ## pieces
                                  .split_hi = 59,
                                  .text = wordpiece_text,
                                  .write = write_wordpiece};
const MatrixVocabulary kByteLevelBpe{.cls = 0,
                                     .sep = 2,
                                     .pad = 1,
                                     .size = kLetterMask + 1,
                                     .first_lo = kFirstLetter,  // no space before the first word
                                     .first_hi = kFirstMarked - 1,
                                     .word_lo = kFirstLetter,
                                     .word_hi = kLetterMask - 1,
                                     .split_lo = kFirstMarked,  // "qz" alone is Ġq z
                                     .split_hi = kLetterMask - 1,
                                     .piece_lo = kFirstLetter,
                                     .piece_hi = kFirstMarked - 1,
                                     .text = letter_text,
                                     .write = write_byte_level_bpe};
const MatrixVocabulary kSentencePiece{.cls = 0,
                                      .sep = 2,
                                      .pad = 1,
                                      .size = kLetterMask + 1,
                                      .first_lo = kFirstMarked,  // the dummy prefix's space
                                      .first_hi = kLetterMask - 1,
                                      .word_lo = kFirstLetter,
                                      .word_hi = kLetterMask - 1,
                                      .split_lo = kFirstMarked,  // "qz" alone is ▁q z
                                      .split_hi = kLetterMask - 1,
                                      .piece_lo = kFirstLetter,
                                      .piece_hi = kFirstMarked - 1,
                                      .text = letter_text,
                                      .write = write_sentencepiece};

const MatrixVocabulary kDebertaSentencePiece{.cls = 1,
                                             .sep = 2,
                                             .pad = 0,
                                             .size = kLetterMask + 1,
                                             .first_lo = kFirstMarked,
                                             .first_hi = kLetterMask - 1,
                                             .word_lo = kFirstLetter,
                                             .word_hi = kLetterMask - 1,
                                             .split_lo = kFirstMarked,
                                             .split_hi = kLetterMask - 1,
                                             .piece_lo = kFirstLetter,
                                             .piece_hi = kFirstMarked - 1,
                                             .text = letter_text,
                                             .write = write_deberta_sentencepiece};

const MatrixConfigKeys kDistilBertKeys{
    "n_layers",   "dim",        "n_heads",
    "hidden_dim", "activation", {"dropout", "attention_dropout", "seq_classif_dropout"}};
const MatrixConfigKeys kBertKeys{
    "num_hidden_layers", "hidden_size", "num_attention_heads",
    "intermediate_size", "hidden_act",  {"hidden_dropout_prob", "attention_probs_dropout_prob"}};
const MatrixConfigKeys kDebertaKeys{
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    {"hidden_dropout_prob", "attention_probs_dropout_prob", "pooler_dropout"}};

}  // namespace

const std::vector<MatrixFamily>& matrix_families() {
  static const std::vector<MatrixFamily> families = {
      {"distilbert", kDistilBertKeys, kWordPiece, 0},
      {"bert", kBertKeys, kWordPiece, 2},
      {"roberta", kBertKeys, kByteLevelBpe, 1},
      {"xlm-roberta", kBertKeys, kSentencePiece, 1},
      // ElectraConfig's embedding_size 128 projected to the case's odd hidden size.
      {"electra", kBertKeys, kWordPiece, 2},
      // deberta-v3-base's shape: relative attention (256 buckets), no absolute positions, no
      // token types, the ContextPooler.
      {"deberta-v2", kDebertaKeys, kDebertaSentencePiece, 0},
  };
  return families;
}

}  // namespace bertfit::testing
