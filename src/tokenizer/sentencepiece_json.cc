// tokenizer.json (Unigram or BPE model, Metaspace pre-tokenizer, Precompiled normalizer, and
// DebertaV2Converter's Strip, Lowercase and [CLS] A [SEP] B [SEP] template) turned
// back into the SentencePiece model it was converted from: the pieces (with Unigram's scores, or
// for BPE score = -id: SentencePiece's BPE merges the highest-scored piece first and its pieces
// are stored by descending score), the normalizer's precompiled charsmap and its whitespace
// rules are written as a serialized sentencepiece.ModelProto (the protobuf wire format by hand:
// Debian ships no protobuf headers with the library) and loaded by libsentencepiece, so
// normalization and segmentation are the library's own.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/load_util.h"
#include "tokenizer/sentencepiece.h"

namespace bertfit {
namespace {

using Json = nlohmann::json;

// --- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) ---
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_int(std::string& out, int field, std::int64_t v) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3);
  put_varint(out, static_cast<std::uint64_t>(v));  // negative: ten bytes, as protobuf does
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_float(std::string& out, int field, float v) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian, as x86-64 stores it
  out.append(b, 4);
}

std::string base64_decode(std::string_view in, const std::string& where) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) throw_error(where, " is not base64");
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// sentencepiece.ModelProto.SentencePiece.Type
constexpr int kNormal = 1, kUnknown = 2, kControl = 3;
struct Piece {
  std::string piece;
  float score;
  int type;
};

const char* type_of(const Json& obj) {
  static thread_local std::string s;
  s = obj.is_object() && obj.contains("type") && obj["type"].is_string()
          ? obj["type"].get<std::string>()
          : std::string(obj.dump());
  return s.c_str();
}

// The charsmap of a Precompiled normalizer (alone, or in a Sequence with the Replace of runs of
// spaces that newer converters add, DebertaV2Converter's Strip and, with do_lower_case, its
// Lowercase, which sets lowercase); "" for no normalizer.
std::string precompiled_charsmap(const Json& normalizer, const std::string& path, bool& lowercase) {
  lowercase = false;
  if (normalizer.is_null()) return "";
  std::vector<Json> parts;
  if (normalizer.value("type", std::string()) == "Sequence" && normalizer.contains("normalizers") &&
      normalizer["normalizers"].is_array()) {
    for (const Json& n : normalizer["normalizers"]) parts.push_back(n);
  } else {
    parts.push_back(normalizer);
  }
  std::string charsmap;
  for (const Json& n : parts) {
    const std::string type = n.is_object() ? n.value("type", std::string()) : "";
    if (type == "Precompiled" && n.contains("precompiled_charsmap") &&
        n["precompiled_charsmap"].is_string()) {
      charsmap = base64_decode(n["precompiled_charsmap"].get<std::string>(),
                               path + ": normalizer.precompiled_charsmap");
    } else if (type == "Replace" && n.contains("pattern") &&
               n["pattern"].value("Regex", std::string()) == " {2,}") {
      // Runs of spaces -> one: SentencePiece's remove_extra_whitespaces does the same.
    } else if (type == "Strip" && n.value("strip_left", true) && n.value("strip_right", true)) {
      // Whitespace at both ends: remove_extra_whitespaces drops it too (after the charsmap has
      // made the Unicode spaces plain ones).
    } else if (type == "Lowercase") {
      lowercase = true;
    } else {
      throw_error(path, ": normalizer ", type_of(n),
                  " is not supported with a SentencePiece model (Precompiled, Strip, Lowercase)");
    }
  }
  return charsmap;
}

// A Metaspace pre-tokenizer with "▁" that prefixes a space (alone or after WhitespaceSplit).
void check_metaspace(const Json& pre, const std::string& path) {
  std::vector<Json> parts;
  if (pre.is_object() && pre.value("type", std::string()) == "Sequence" &&
      pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const Json& p : pre["pretokenizers"]) parts.push_back(p);
  } else {
    parts.push_back(pre);
  }
  bool metaspace = false;
  for (const Json& p : parts) {
    const std::string type = p.is_object() ? p.value("type", std::string()) : "";
    if (type == "WhitespaceSplit") continue;
    if (type == "Punctuation") {
      // DebertaV2Converter's split_by_punct: the fast tokenizer then gives "\u2581" tokens of
      // its own before punctuation, which DebertaV2Tokenizer does not.
      throw_error(path,
                  ": pre_tokenizer Punctuation (DeBERTa's split_by_punct) is not supported in "
                  "tokenizer.json; give the folder's spm.model (DebertaV2Tokenizer) instead");
    }
    if (type == "Metaspace" && p.value("replacement", std::string()) == "\u2581" &&
        (p.value("add_prefix_space", false) ||
         p.value("prepend_scheme", std::string()) == "always")) {
      metaspace = true;
      continue;
    }
    throw_error(path, ": pre_tokenizer ", type_of(p),
                " is not supported with a SentencePiece model (Metaspace \"\u2581\" with a prefix "
                "space, optionally after WhitespaceSplit)");
  }
  if (!metaspace) throw_error(path, ": pre_tokenizer has no Metaspace");
}

// BERT's template ([CLS] $A [SEP] $B [SEP], DebertaV2Converter's) when the post_processor is a
// TemplateProcessing with one special token between A and B; RoBERTa's otherwise (XLM-R's
// converter writes two, RobertaProcessing is RoBERTa's, and no post_processor was the older
// files' way).
bool bert_template(const Json& post) {
  if (!post.is_object() || post.value("type", std::string()) != "TemplateProcessing" ||
      !post.contains("pair") || !post["pair"].is_array()) {
    return false;
  }
  int between = -1;  // special tokens seen after $A and before $B
  for (const Json& part : post["pair"]) {
    if (!part.is_object()) return false;
    if (part.contains("Sequence")) {
      const std::string id = part["Sequence"].value("id", std::string());
      if (id == "A") between = 0;
      if (id == "B") return between == 1;
    } else if (part.contains("SpecialToken") && between >= 0) {
      ++between;
    }
  }
  return false;
}

}  // namespace

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_tokenizer_json(
    const std::string& path, const std::string& config_dir) {
  const Json j = tokenizer_detail::parse_json_file(path);
  std::vector<Piece> pieces;
  bool bpe = false;
  std::vector<tokenizer_detail::AddedToken> added;
  std::string charsmap;
  bool lowercase = false, deberta = false;
  std::size_t model_pieces = 0;  // the model's own pieces (added tokens may follow)
  try {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
      throw_error(path, ": no \"model\" object");
    }
    const Json& m = j["model"];
    const std::string type = m.value("type", std::string(m.contains("merges") ? "BPE" : "Unigram"));
    check_metaspace(j.value("pre_tokenizer", Json()), path);
    charsmap = precompiled_charsmap(j.value("normalizer", Json()), path, lowercase);
    deberta = bert_template(j.value("post_processor", Json()));
    std::int64_t unk = -1;
    if (type == "Unigram") {
      if (!m.contains("vocab") || !m["vocab"].is_array() || m["vocab"].empty()) {
        throw_error(path, ": model.vocab must be a non-empty array of [piece, score]");
      }
      for (std::size_t i = 0; i < m["vocab"].size(); ++i) {
        const Json& v = m["vocab"][i];
        if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number()) {
          throw_error(path, ": model.vocab[", i, "] is not [piece, score]");
        }
        pieces.push_back({v[0].get<std::string>(), v[1].get<float>(), kNormal});
      }
      if (!m.contains("unk_id") || !m["unk_id"].is_number_integer()) {
        throw_error(path, ": model.unk_id is missing");
      }
      unk = m["unk_id"].get<std::int64_t>();
    } else if (type == "BPE") {
      bpe = true;
      if (!m.contains("vocab") || !m["vocab"].is_object() || m["vocab"].empty()) {
        throw_error(path, ": model.vocab must be a non-empty object of piece -> id");
      }
      pieces.resize(m["vocab"].size());
      for (const auto& [piece, id] : m["vocab"].items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
            id.get<std::int64_t>() >= static_cast<std::int64_t>(pieces.size()) ||
            !pieces[id.get<std::size_t>()].piece.empty()) {
          throw_error(path, ": model.vocab: piece \"", piece, "\" has id ", id.dump(),
                      "; ids must be 0..", pieces.size() - 1, ", each once");
        }
        const auto i = id.get<std::size_t>();
        pieces[i] = {piece, -static_cast<float>(i), kNormal};
      }
      const std::string unk_token = m.value("unk_token", Json("<unk>")).is_string()
                                        ? m.value("unk_token", std::string("<unk>"))
                                        : std::string("<unk>");
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (pieces[i].piece == unk_token) unk = static_cast<std::int64_t>(i);
      }
    } else {
      throw_error(path, ": model.type \"", type,
                  "\" is not supported with a Metaspace pre-tokenizer");
    }
    if (unk < 0 || unk >= static_cast<std::int64_t>(pieces.size())) {
      throw_error(path, ": the model has no unknown piece (model.unk_id / model.unk_token)");
    }
    pieces[static_cast<std::size_t>(unk)].type = kUnknown;
    model_pieces = pieces.size();
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (std::size_t i = 0; i < j["added_tokens"].size(); ++i) {
        const Json& a = j["added_tokens"][i];
        if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
            !a.contains("id") || !a["id"].is_number_integer() || a["id"].get<std::int64_t>() < 0) {
          throw_error(path, ": added_tokens[", i, "] needs a \"content\" string and an \"id\"");
        }
        const std::string content = a["content"].get<std::string>();
        const auto id = a["id"].get<std::int64_t>();
        if (id == static_cast<std::int64_t>(pieces.size())) {
          pieces.push_back({content, 0.0f, kControl});
        } else if (id > static_cast<std::int64_t>(pieces.size()) ||
                   pieces[static_cast<std::size_t>(id)].piece != content) {
          throw_error(path, ": added_tokens[", i, "] (\"", content, "\", id ", id,
                      ") neither is the vocabulary's piece of that id nor follows it");
        }
        if (a.value("special", false) && id != unk) {
          pieces[static_cast<std::size_t>(id)].type = kControl;
        }
        added.push_back({content, static_cast<std::int32_t>(id), a.value("lstrip", false),
                         a.value("rstrip", false)});
      }
    }
  } catch (const Json::exception& e) {
    throw_error(path, ": unexpected content: ", e.what());
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].piece.empty()) throw_error(path, ": model.vocab has no piece for id ", i);
  }

  std::string proto;
  for (const Piece& p : pieces) {
    std::string msg;
    put_bytes(msg, 1, p.piece);
    put_float(msg, 2, p.score);
    put_int(msg, 3, p.type);
    put_bytes(proto, 1, msg);
  }
  std::string trainer;
  put_int(trainer, 3, bpe ? 2 : 1);  // model_type: UNIGRAM 1, BPE 2
  put_int(trainer, 4, static_cast<std::int64_t>(pieces.size()));
  put_bytes(proto, 2, trainer);
  std::string normalizer;
  put_bytes(normalizer, 1, charsmap.empty() ? "identity" : "nmt_nfkc");
  if (!charsmap.empty()) put_bytes(normalizer, 2, charsmap);
  put_int(normalizer, 3, 1);  // add_dummy_prefix (Metaspace's prefix space)
  put_int(normalizer, 4, 1);  // remove_extra_whitespaces (WhitespaceSplit)
  put_int(normalizer, 5, 1);  // escape_whitespaces (Metaspace's "▁")
  put_bytes(proto, 3, normalizer);

  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(
      deberta ? TokenizerKind::kDebertaSentencePiece : TokenizerKind::kSentencePiece,
      deberta ? PairTemplate::kBert : PairTemplate::kRoberta));
  t->mapping_ = FairseqMapping::kNone;
  t->offset_ = 0;
  t->load_proto(proto, path);
  const int size = t->sp_->GetPieceSize();
  t->max_id_ = size - 1;
  t->spm_to_id_.resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) t->spm_to_id_[i] = i;
  for (const auto& a : added) t->added_.add(a);
  t->lowercase_ = lowercase;
  // The added tokens are matched before the normalizer: kept as written when lowercasing.
  for (const auto& a : added) t->keep_case_.push_back(a.content);
  std::sort(t->keep_case_.begin(), t->keep_case_.end());
  // DeBERTa's added tokens: those past the model's pieces ([MASK]).
  t->first_added_id_ = static_cast<std::int32_t>(model_pieces);

  // The special tokens' strings from config_dir (XLMRobertaTokenizerFast's or
  // DebertaV2TokenizerFast's defaults otherwise).
  const std::string config_path = join_path(config_dir, "tokenizer_config.json");
  const std::string map_path = join_path(config_dir, "special_tokens_map.json");
  Json config = Json::object(), special_map = Json::object();
  if (!config_dir.empty()) {
    config = tokenizer_detail::optional_json_object(config_path);
    special_map = tokenizer_detail::optional_json_object(map_path);
  }
  const std::pair<tokenizer_detail::SpecialTokenRule, std::int32_t*> specs[] = {
      {{"unk_token", deberta ? "[UNK]" : "<unk>", true, false}, &t->special_.unk},
      {{"sep_token", deberta ? "[SEP]" : "</s>", true, false}, &t->special_.sep},
      {{"pad_token", deberta ? "[PAD]" : "<pad>", true, false}, &t->special_.pad},
      {{"cls_token", deberta ? "[CLS]" : "<s>", true, false}, &t->special_.cls},
      {{"mask_token", deberta ? "[MASK]" : "<mask>", true, true}, &t->special_.mask}};
  for (const auto& [rule, out] : specs) {
    const auto r =
        tokenizer_detail::resolve_special_token(rule, config, config_path, special_map, map_path);
    *out = t->sp_->PieceToId(r.content);
    t->special_strings_.push_back(r.content);
  }
  t->source_files_ = {path};
  return t;
}

}  // namespace bertfit
