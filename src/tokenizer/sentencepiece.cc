// SentencePiece tokenizer over libsentencepiece with XLM-R's and CamemBERT's fairseq id
// mappings (see sentencepiece.h).
#include "tokenizer/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/load_util.h"

namespace bertfit {

SentencePieceTokenizer::SentencePieceTokenizer()
    : Tokenizer(TokenizerKind::kSentencePiece, PairTemplate::kRoberta) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::int32_t SentencePieceTokenizer::token_to_id(const std::string& piece) const {
  if (mapping_ == FairseqMapping::kNone) return sp_->PieceToId(piece);
  for (const auto& [token, id] : fairseq_) {
    if (token == piece) return id;
  }
  const int spm = sp_->PieceToId(piece);
  if (spm == 0) return 3;  // spm id 0 (unknown) -> fairseq <unk>, as both tokenizers test it
  return spm + offset_;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_model_file(
    const std::string& model_path, const std::string& config_dir, FairseqMapping mapping) {
  if (!path_exists(model_path)) throw_error(model_path, ": file not found");
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->load_proto(read_file(model_path), model_path);
  const int size = t->sp_->GetPieceSize();
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

  // Special tokens as from_pretrained settles them (resolve_special_token): __init__ wraps only
  // <mask>, into AddedToken(lstrip=True); the others stay plain strings (stripped both sides).
  const std::string config_path = join_path(config_dir, "tokenizer_config.json");
  const std::string map_path = join_path(config_dir, "special_tokens_map.json");
  nlohmann::json config = nlohmann::json::object(), special_map = nlohmann::json::object();
  if (!config_dir.empty()) {
    config = tokenizer_detail::optional_json_object(config_path);
    special_map = tokenizer_detail::optional_json_object(map_path);
  }
  struct Spec {
    tokenizer_detail::SpecialTokenRule rule;
    std::int32_t* out;
  };
  std::int32_t bos = -1, eos = -1;
  const Spec specs[] = {{{"bos_token", "<s>", false, false}, &bos},
                        {{"eos_token", "</s>", false, false}, &eos},
                        {{"unk_token", "<unk>", false, false}, &t->special_.unk},
                        {{"sep_token", "</s>", false, false}, &t->special_.sep},
                        {{"pad_token", "<pad>", false, false}, &t->special_.pad},
                        {{"cls_token", "<s>", false, false}, &t->special_.cls},
                        {{"mask_token", "<mask>", true, true}, &t->special_.mask}};
  std::vector<std::string> specials = plain;
  for (const Spec& s : specs) {
    const auto r =
        tokenizer_detail::resolve_special_token(s.rule, config, config_path, special_map, map_path);
    *s.out = t->token_to_id(r.content);
    t->added_.add({r.content, *s.out, r.lstrip, r.rstrip});
    specials.push_back(r.content);
  }
  for (const std::string& p : plain) {
    t->added_.add({p, t->token_to_id(p), true, true});
    t->extra_special_ids_.push_back(t->token_to_id(p));
  }
  t->extra_special_ids_.push_back(bos);
  t->extra_special_ids_.push_back(eos);
  // added_tokens.json: non-special tokens after the vocabulary, plain (stripped both sides).
  // Their ids must follow one another from the vocabulary's size (else transformers refuses the
  // file); add_tokens then adds, with the next free ids, only the tokens that convert to the
  // unknown id: with an spm model whose <unk> is not spm id 0 none does (an unknown piece
  // converts to spm unk + offset).
  if (!config_dir.empty()) {
    const std::string added_path = join_path(config_dir, "added_tokens.json");
    std::int32_t expected = t->max_id_ + 1;
    for (const auto& [token, id] : tokenizer_detail::read_added_tokens_json(
             added_path, 2 * static_cast<std::int64_t>(size) + 1024)) {
      if (std::find(specials.begin(), specials.end(), token) != specials.end()) continue;
      if (id != expected) {
        throw_error(added_path, ": token \"", token, "\" has id ", id, "; the next id is ",
                    expected, " (added tokens continue the vocabulary)");
      }
      ++expected;
      if (t->token_to_id(token) != t->special_.unk) continue;
      ++t->max_id_;
      t->added_tokens_.push_back(token);
      t->added_.add({token, t->max_id_, true, true});
    }
  }
  t->source_files_ = {model_path};
  return t;
}

void SentencePieceTokenizer::load_proto(const std::string& bytes, const std::string& source) {
  sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto status = sp_->LoadFromSerializedProto(bytes); !status.ok()) {
    throw_error(source, ": not a SentencePiece model (", status.ToString(), ")");
  }
  if (sp_->GetPieceSize() <= 0) throw_error(source, ": the SentencePiece model has no pieces");
}

std::string SentencePieceTokenizer::token(std::int32_t id) const {
  if (mapping_ == FairseqMapping::kNone) {
    if (id < 0 || id > max_id_) {
      throw_error("token id ", id, " is outside the vocabulary (0..", max_id_, ")");
    }
    return sp_->IdToPiece(id);
  }
  for (const auto& [token, fid] : fairseq_) {
    if (fid == id) return token;
  }
  const std::int32_t mask = static_cast<std::int32_t>(spm_to_id_.size()) + offset_;
  if (id > mask && id <= max_id_) return added_tokens_[static_cast<std::size_t>(id - mask - 1)];
  if (id < offset_ || id >= mask) {
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
