// SentencePiece tokenizer over libsentencepiece with XLM-R's and CamemBERT's fairseq id
// mappings (see sentencepiece.h).
#include "tokenizer/sentencepiece.h"

#include <sentencepiece_processor.h>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/load_util.h"

namespace bertfit {

SentencePieceTokenizer::SentencePieceTokenizer()
    : Tokenizer(TokenizerKind::kSentencePiece, PairTemplate::kRoberta) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::int32_t SentencePieceTokenizer::token_to_id(const std::string& piece) const {
  for (const auto& [token, id] : fairseq_) {
    if (token == piece) return id;
  }
  const int spm = sp_->PieceToId(piece);
  if (spm == 0) return 3;  // spm id 0 (unknown) -> fairseq <unk>, as both tokenizers test it
  return spm + offset_;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_model_file(
    const std::string& model_path, const std::string& config_path, FairseqMapping mapping) {
  if (!path_exists(model_path)) throw_error(model_path, ": file not found");
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const std::string bytes = read_file(model_path);
  if (const auto status = t->sp_->LoadFromSerializedProto(bytes); !status.ok()) {
    throw_error(model_path, ": not a SentencePiece model (", status.ToString(), ")");
  }
  const int size = t->sp_->GetPieceSize();
  if (size <= 0) throw_error(model_path, ": the SentencePiece model has no pieces");
  t->mapping_ = mapping;
  std::vector<std::string> plain;  // specials given as strings: stripped on both sides
  if (mapping == FairseqMapping::kXlmRoberta) {
    t->fairseq_ = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
    t->offset_ = 1;
  } else {
    t->fairseq_ = {{"<s>NOTUSED", 0}, {"<pad>", 1}, {"</s>NOTUSED", 2}, {"<unk>", 3}};
    t->offset_ = 4;
    plain = {"<s>NOTUSED", "</s>NOTUSED"};  // CamembertTokenizer's additional_special_tokens
  }
  const std::int32_t mask_id = size + t->offset_;
  t->fairseq_.emplace_back("<mask>", mask_id);
  t->max_id_ = mask_id;
  t->spm_to_id_.resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) t->spm_to_id_[i] = t->token_to_id(t->sp_->IdToPiece(i));
  // transformers maps the piece strings sp_model.encode returns; an unknown piece is its surface
  // text, whose PieceToId is the spm unknown id, mapped like any other id (3 if it is 0).
  const int unk = t->sp_->unk_id();
  if (unk >= 0 && unk < size) t->spm_to_id_[unk] = unk == 0 ? 3 : unk + t->offset_;

  nlohmann::json config = nlohmann::json::object();
  if (!config_path.empty() && path_exists(config_path)) {
    config = tokenizer_detail::parse_json_file(config_path);
    if (!config.is_object()) throw_error(config_path, ": expected a JSON object");
  }
  struct Spec {
    const char* key;
    const char* fallback;
    std::int32_t* out;
  };
  std::int32_t bos = -1, eos = -1;
  const Spec specs[] = {{"bos_token", "<s>", &bos},
                        {"eos_token", "</s>", &eos},
                        {"unk_token", "<unk>", &t->special_.unk},
                        {"sep_token", "</s>", &t->special_.sep},
                        {"pad_token", "<pad>", &t->special_.pad},
                        {"cls_token", "<s>", &t->special_.cls},
                        {"mask_token", "<mask>", &t->special_.mask}};
  for (const Spec& s : specs) {
    const auto c =
        tokenizer_detail::config_token(config, s.key, config_path)
            .value_or(tokenizer_detail::ConfigToken{s.fallback, std::nullopt, std::nullopt});
    const std::int32_t id = t->token_to_id(c.content);
    if (id < 0 || id > t->max_id_) throw_error(model_path, ": no id for ", s.key, " ", c.content);
    *s.out = id;
    // <mask> is AddedToken(lstrip=True); the others are plain strings (strip both sides)
    // unless tokenizer_config.json gives them as objects.
    const bool is_mask = std::string_view(s.key) == "mask_token";
    t->added_.add({c.content, id, c.lstrip.value_or(true), c.rstrip.value_or(!is_mask)});
  }
  for (const std::string& p : plain) t->added_.add({p, t->token_to_id(p), true, true});
  t->source_files_ = {model_path};
  return t;
}

std::string SentencePieceTokenizer::token(std::int32_t id) const {
  for (const auto& [token, fid] : fairseq_) {
    if (fid == id) return token;
  }
  if (id < offset_ || id >= max_id_) {
    throw_error("token id ", id, " is outside the vocabulary (0..", max_id_, ")");
  }
  return sp_->IdToPiece(id - offset_);
}

void SentencePieceTokenizer::tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                                           std::vector<TokenOffset>* offsets) const {
  thread_local std::vector<tokenizer_detail::Segment> segments;
  thread_local std::vector<int> spm_ids;
  added_.split(text, segments);
  for (const tokenizer_detail::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      if (offsets != nullptr) offsets->push_back({seg.begin, seg.end});
      continue;
    }
    const std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
    if (offsets == nullptr) {
      spm_ids.clear();
      // Encoding fails only on an internal error of the library (a bad model is refused at
      // load); an empty result is then the honest answer.
      if (!sp_->Encode(piece, &spm_ids).ok()) continue;
      for (int id : spm_ids) ids.push_back(spm_to_id_[id]);
      continue;
    }
    sentencepiece::ImmutableSentencePieceText spt;
    if (!sp_->Encode(piece, spt.mutable_proto()).ok()) continue;
    for (const auto& p : spt.pieces()) {
      ids.push_back(spm_to_id_[p.id()]);
      offsets->push_back({seg.begin + p.begin(), seg.begin + p.end()});
    }
  }
}

}  // namespace bertfit
