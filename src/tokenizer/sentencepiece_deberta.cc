// DeBERTa-v2/v3's spm.model read as transformers 4.28.1's DebertaV2Tokenizer.from_pretrained
// reads it (see sentencepiece.h): the model's own ids, the special tokens as plain strings,
// added_tokens.json and sanitize_special_tokens giving the ids after the pieces, do_lower_case
// and split_by_punct from tokenizer_config.json.
#include <sentencepiece_processor.h>

#include <algorithm>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/load_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/sentencepiece.h"

namespace bertfit {

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_deberta_model_file(
    const std::string& model_path, const std::string& config_dir) {
  if (!path_exists(model_path)) throw_error(model_path, ": file not found");
  std::unique_ptr<SentencePieceTokenizer> t(
      new SentencePieceTokenizer(TokenizerKind::kDebertaSentencePiece, PairTemplate::kBert));
  t->load_proto(read_file(model_path), model_path);
  const int size = t->sp_->GetPieceSize();
  t->mapping_ = FairseqMapping::kNone;
  t->offset_ = 0;
  t->max_id_ = size - 1;
  t->first_added_id_ = size;
  // The ids the library gives are final (an unknown piece is the spm unknown id, as
  // PieceToId of its surface is).
  t->spm_to_id_.resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) t->spm_to_id_[i] = i;

  const std::string config_path = join_path(config_dir, "tokenizer_config.json");
  const std::string map_path = join_path(config_dir, "special_tokens_map.json");
  nlohmann::json config = nlohmann::json::object(), special_map = nlohmann::json::object();
  if (!config_dir.empty()) {
    config = tokenizer_detail::optional_json_object(config_path);
    special_map = tokenizer_detail::optional_json_object(map_path);
  }
  t->lowercase_ =
      tokenizer_detail::optional_bool(config, "do_lower_case", config_path).value_or(false);
  t->split_by_punct_ =
      tokenizer_detail::optional_bool(config, "split_by_punct", config_path).value_or(false);

  // __init__ keeps every special token a plain string (stripped on both sides in raw text)
  // unless the files give an AddedToken object.
  struct Spec {
    tokenizer_detail::SpecialTokenRule rule;
    std::int32_t* out;
  };
  std::int32_t bos = -1, eos = -1;
  const Spec specs[] = {{{"bos_token", "[CLS]", false, false}, &bos},
                        {{"eos_token", "[SEP]", false, false}, &eos},
                        {{"unk_token", "[UNK]", false, false}, &t->special_.unk},
                        {{"sep_token", "[SEP]", false, false}, &t->special_.sep},
                        {{"pad_token", "[PAD]", false, false}, &t->special_.pad},
                        {{"cls_token", "[CLS]", false, false}, &t->special_.cls},
                        {{"mask_token", "[MASK]", false, false}, &t->special_.mask}};
  std::vector<tokenizer_detail::ResolvedToken> resolved;
  for (const Spec& s : specs) {
    resolved.push_back(tokenizer_detail::resolve_special_token(s.rule, config, config_path,
                                                               special_map, map_path));
  }
  const std::string& unk_token = resolved[2].content;
  for (const auto& r : resolved) {
    if (std::find(t->special_strings_.begin(), t->special_strings_.end(), r.content) ==
        t->special_strings_.end()) {
      t->special_strings_.push_back(r.content);
    }
  }

  // convert_tokens_to_ids: the added tokens first, then the model's PieceToId (its unknown id
  // for a string that is no piece).
  auto to_id = [&](const std::string& token) -> std::int32_t {
    const auto it = std::find(t->added_tokens_.begin(), t->added_tokens_.end(), token);
    if (it != t->added_tokens_.end()) {
      return size + static_cast<std::int32_t>(it - t->added_tokens_.begin());
    }
    return t->sp_->PieceToId(token);
  };
  const std::int32_t unk_id = to_id(unk_token);
  // _add_tokens: a token gets the next id unless it is the unknown token or already has an id.
  auto add = [&](const std::string& token) {
    if (token == unk_token || to_id(token) != unk_id) return false;
    t->added_tokens_.push_back(token);
    ++t->max_id_;
    return true;
  };
  std::vector<std::string> plain_added;  // added_tokens.json's non-special tokens
  if (!config_dir.empty()) {
    // added_tokens.json: ids must follow one another from the vocabulary's size (else
    // transformers refuses the file); with do_lower_case a non-special token is lowercased.
    const std::string added_path = join_path(config_dir, "added_tokens.json");
    std::int32_t expected = size;
    for (const auto& [token, id] :
         tokenizer_detail::read_added_tokens_json(added_path, 2 * std::int64_t{size} + 1024)) {
      if (id != expected) {
        throw_error(added_path, ": token \"", token, "\" has id ", id, "; the next id is ",
                    expected, " (added tokens continue the vocabulary)");
      }
      ++expected;
      const bool special = std::find(t->special_strings_.begin(), t->special_strings_.end(),
                                     token) != t->special_strings_.end();
      const std::string content =
          !special && t->lowercase_ ? tokenizer_detail::python_lower(token) : token;
      if (add(content) && !special) plain_added.push_back(content);
    }
  }
  // sanitize_special_tokens: the special tokens not yet known, in attribute order.
  for (const std::string& s : t->special_strings_) add(s);

  for (std::size_t i = 0; i < resolved.size(); ++i) {
    *specs[i].out = to_id(resolved[i].content);
    t->added_.add({resolved[i].content, *specs[i].out, resolved[i].lstrip, resolved[i].rstrip});
  }
  for (const std::string& token : plain_added) t->added_.add({token, to_id(token), true, true});
  t->extra_special_ids_ = {bos, eos};
  // do_lower_case keeps unique_no_split_tokens + all_special_tokens as written.
  t->keep_case_ = t->special_strings_;
  t->keep_case_.insert(t->keep_case_.end(), plain_added.begin(), plain_added.end());
  std::sort(t->keep_case_.begin(), t->keep_case_.end());
  t->keep_case_.erase(std::unique(t->keep_case_.begin(), t->keep_case_.end()), t->keep_case_.end());
  t->source_files_ = {model_path};
  return t;
}

}  // namespace bertfit
