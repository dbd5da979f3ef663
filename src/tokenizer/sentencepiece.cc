// SentencePiece tokenizer over libsentencepiece with XLM-R's and CamemBERT's fairseq id
// mappings, and the text path every SentencePiece variant shares: added tokens split off,
// DeBERTa's lowercasing and punctuation split, the spm model (see sentencepiece.h).
#include "tokenizer/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/load_util.h"
#include "tokenizer/normalizer.h"

namespace bertfit {

SentencePieceTokenizer::SentencePieceTokenizer(TokenizerKind kind, PairTemplate pair_template)
    : Tokenizer(kind, pair_template) {}
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
  std::unique_ptr<SentencePieceTokenizer> t(
      new SentencePieceTokenizer(TokenizerKind::kSentencePiece, PairTemplate::kRoberta));
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
    const int pieces = sp_->GetPieceSize();
    if (id < pieces) return sp_->IdToPiece(id);
    return added_tokens_[static_cast<std::size_t>(id - pieces)];
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

void SentencePieceTokenizer::lower_keeping_tokens(std::string_view text, std::string& out,
                                                  std::vector<TokenOffset>& origin) const {
  out.clear();
  origin.clear();
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  const auto* p = begin;
  while (p < end) {
    const auto at = static_cast<std::uint32_t>(p - begin);
    const std::string_view rest = text.substr(at);
    const auto kept = std::find_if(keep_case_.begin(), keep_case_.end(),
                                   [&](const std::string& k) { return rest.starts_with(k); });
    if (kept != keep_case_.end()) {
      for (std::uint32_t i = 0; i < kept->size(); ++i) origin.push_back({at + i, at + i + 1});
      out += *kept;
      p += kept->size();
      continue;
    }
    const unsigned char* start = p;
    if (*p < 0x80) {
      out.push_back(static_cast<char>(*p >= 'A' && *p <= 'Z' ? *p + ('a' - 'A') : *p));
      ++p;
    } else {
      const char32_t cp = tokenizer_detail::decode_utf8(p, end);
      const std::string_view bytes(reinterpret_cast<const char*>(start),
                                   static_cast<std::size_t>(p - start));
      // An invalid byte (decoded as U+FFFD) stays as it is; U+FFFD has no lowercase.
      out += cp == 0xFFFD ? std::string(bytes) : tokenizer_detail::python_lower(bytes);
    }
    const auto stop = static_cast<std::uint32_t>(p - begin);
    origin.resize(out.size(), TokenOffset{at, stop});
  }
}

namespace {

// Where the fast tokenizer's alignment starts a piece that begins with a run of whitespace
// (which the spm model folds into its "\u2581"): at the run's last character, when the piece
// holds more than whitespace; libsentencepiece starts it at the run's first.
std::uint32_t last_space_of_run(std::string_view text, std::uint32_t begin, std::uint32_t end) {
  const auto* base = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char* p = base + begin;
  const unsigned char* stop = base + end;
  const unsigned char* last = nullptr;
  while (p < stop) {
    const unsigned char* at = p;
    const char32_t cp = *p < 0x80 ? *p++ : tokenizer_detail::decode_utf8(p, stop);
    if (!tokenizer_detail::is_python_space(cp)) {
      return last != nullptr ? static_cast<std::uint32_t>(last - base) : begin;
    }
    last = at;
  }
  return begin;  // whitespace only: as the library has it
}

}  // namespace

void SentencePieceTokenizer::encode_spm(std::string_view text, std::uint32_t base,
                                        std::vector<std::int32_t>& ids,
                                        std::vector<TokenOffset>* offsets) const {
  if (offsets == nullptr) {
    thread_local std::vector<int> spm_ids;
    spm_ids.clear();
    // Encoding fails only on an internal error of the library (a bad model is refused at
    // load); an empty result is then the honest answer.
    if (!sp_->Encode(text, &spm_ids).ok()) return;
    for (int id : spm_ids) ids.push_back(spm_to_id_[id]);
    return;
  }
  sentencepiece::ImmutableSentencePieceText spt;
  if (!sp_->Encode(text, spt.mutable_proto()).ok()) return;
  const bool fast_alignment = kind_ == TokenizerKind::kDebertaSentencePiece;
  for (const auto& p : spt.pieces()) {
    ids.push_back(spm_to_id_[p.id()]);
    std::uint32_t begin = fast_alignment ? last_space_of_run(text, p.begin(), p.end()) : p.begin();
    std::uint32_t stop = p.end();
    if (fast_alignment && begin == stop && begin < text.size() && p.piece() == "\u2581") {
      // The dummy prefix alone (before a character with no "\u2581X" piece): the fast
      // tokenizer's Metaspace prepends it aligned with the text's first character.
      const auto* at = reinterpret_cast<const unsigned char*>(text.data()) + begin;
      const auto* next = at;
      if (*next < 0x80) {
        ++next;
      } else {
        tokenizer_detail::decode_utf8(
            next, reinterpret_cast<const unsigned char*>(text.data()) + text.size());
      }
      stop = begin + static_cast<std::uint32_t>(next - at);
    }
    offsets->push_back({base + begin, base + stop});
  }
}

void SentencePieceTokenizer::encode_text(std::string_view text, std::uint32_t base,
                                         std::vector<std::int32_t>& ids,
                                         std::vector<TokenOffset>* offsets) const {
  if (!split_by_punct_) {
    encode_spm(text, base, ids, offsets);
    return;
  }
  // SPMTokenizer._run_split_on_punc: each punctuation character a word of its own, the text
  // between them (spaces included) a word; each word through the spm model alone.
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  std::uint32_t word = 0;
  for (const unsigned char* p = begin; p < end;) {
    const auto at = static_cast<std::uint32_t>(p - begin);
    const char32_t cp = *p < 0x80 ? *p++ : tokenizer_detail::decode_utf8(p, end);
    if (!tokenizer_detail::is_punctuation(cp)) continue;
    const auto stop = static_cast<std::uint32_t>(p - begin);
    if (at > word) encode_spm(text.substr(word, at - word), base + word, ids, offsets);
    encode_spm(text.substr(at, stop - at), base + at, ids, offsets);
    word = stop;
  }
  if (word < text.size()) encode_spm(text.substr(word), base + word, ids, offsets);
}

void SentencePieceTokenizer::tokenize_into(std::string_view text, std::vector<std::int32_t>& ids,
                                           std::vector<TokenOffset>* offsets) const {
  thread_local std::vector<tokenizer_detail::Segment> segments;
  thread_local std::string lowered;
  thread_local std::vector<TokenOffset> origin;
  const std::size_t first_offset = offsets != nullptr ? offsets->size() : 0;
  std::string_view work = text;
  if (lowercase_) {
    lower_keeping_tokens(text, lowered, origin);
    work = lowered;
  }
  added_.split(work, segments);
  for (const tokenizer_detail::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      if (offsets != nullptr) offsets->push_back({seg.begin, seg.end});
      continue;
    }
    encode_text(work.substr(seg.begin, seg.end - seg.begin), seg.begin, ids, offsets);
  }
  if (lowercase_ && offsets != nullptr) {
    // Offsets into the lowercased text -> the original characters they came from.
    const auto size = static_cast<std::uint32_t>(text.size());
    for (std::size_t i = first_offset; i < offsets->size(); ++i) {
      TokenOffset& o = (*offsets)[i];
      const std::uint32_t begin = o.begin < origin.size() ? origin[o.begin].begin : size;
      const std::uint32_t end = o.end > o.begin ? origin[o.end - 1].end : begin;
      o = {begin, end};
    }
  }
}

}  // namespace bertfit
