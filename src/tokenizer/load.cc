// load_tokenizer: picks the tokenizer of a model folder from the files present,
// tokenizer_config.json's tokenizer_class and config.json's model_type (and reads its
// clean_up_tokenization_spaces for decode); load_tokenizer_file for a
// single file; the tokenizer files a saved model carries (copied unchanged).
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/load_util.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace bertfit {
namespace {

using Json = nlohmann::json;

// A string field of a JSON file in dir ("" if the file or the key is absent). A malformed
// config.json is the model loader's to report: read leniently here.
std::string string_field(const std::string& dir, const char* file, const char* key, bool lenient) {
  const std::string path = join_path(dir, file);
  if (!path_exists(path)) return "";
  Json j;
  if (lenient) {
    j = Json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
    return j[key].get<std::string>();
  }
  j = tokenizer_detail::parse_json_file(path);
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  if (!j[key].is_string()) throw_error(path, ": \"", key, "\" must be a string");
  return j[key].get<std::string>();
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.starts_with(prefix); }

// tokenizer.json by its model.type. A byte-level BPE one is read with the tokenizers library's
// semantics (kFastByteLevelBpe) when fast (a ModernBERT folder) or when its post-processor is a
// TemplateProcessing or BertProcessing (not RoBERTa's own).
std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& path,
                                               const std::string& config_dir, bool fast = false) {
  const Json j = tokenizer_detail::parse_json_file(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw_error(path, ": no \"model\" object");
  }
  const Json& m = j["model"];
  std::string type = m.value("type", std::string());
  if (type.empty()) {  // the older format names no type
    type = m.contains("merges")                           ? "BPE"
           : m.contains("vocab") && m["vocab"].is_array() ? "Unigram"
                                                          : "WordPiece";
  }
  if (type == "WordPiece")
    return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_tokenizer_json(path));
  if (type == "BPE") {
    const Json pre = j.value("pre_tokenizer", Json());
    if (pre.is_object() && pre.value("type", std::string()) == "ByteLevel") {
      const Json post = j.value("post_processor", Json());
      const std::string post_type = post.is_object() ? post.value("type", std::string()) : "";
      if (fast || post_type == "TemplateProcessing" || post_type == "BertProcessing") {
        return ByteLevelBpeTokenizer::from_fast_tokenizer_json(path, config_dir);
      }
      return ByteLevelBpeTokenizer::from_tokenizer_json(path, config_dir);
    }
    return SentencePieceTokenizer::from_tokenizer_json(path, config_dir);
  }
  if (type == "Unigram") return SentencePieceTokenizer::from_tokenizer_json(path, config_dir);
  throw_error(path, ": model.type \"", type, "\" is not supported (WordPiece, BPE, Unigram)");
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  if (!is_directory(dir)) throw_error("model folder ", dir, " does not exist or is not a folder");
  const std::string cls = string_field(dir, "tokenizer_config.json", "tokenizer_class", false);
  const std::string model_type = string_field(dir, "config.json", "model_type", true);
  const bool has_vocab_txt = path_exists(join_path(dir, "vocab.txt"));
  const bool has_bpe =
      path_exists(join_path(dir, "vocab.json")) && path_exists(join_path(dir, "merges.txt"));
  const bool has_spm = path_exists(join_path(dir, "sentencepiece.bpe.model"));
  const bool has_deberta_spm = path_exists(join_path(dir, "spm.model"));
  const bool has_json = path_exists(join_path(dir, "tokenizer.json"));

  // What the folder's tokenizer_class (else model_type) asks for, when it says.
  const bool wants_bpe = starts_with(cls, "Roberta") || starts_with(cls, "GPT2") ||
                         (cls.empty() && model_type == "roberta");
  const bool wants_camembert =
      starts_with(cls, "Camembert") || (cls.empty() && model_type == "camembert");
  const bool wants_spm = wants_camembert || starts_with(cls, "XLMRoberta") ||
                         (cls.empty() && model_type == "xlm-roberta");
  const bool wants_wordpiece =
      starts_with(cls, "Bert") || starts_with(cls, "DistilBert") || starts_with(cls, "Electra");
  const bool wants_deberta =
      starts_with(cls, "DebertaV2") || (cls.empty() && model_type == "deberta-v2");
  // transformers' generic fast tokenizer, or a ModernBERT model: the tokenizer.json as it is.
  const bool wants_fast = cls == "PreTrainedTokenizerFast" || model_type == "modernbert";

  auto bpe = [&] {
    return ByteLevelBpeTokenizer::from_files(join_path(dir, "vocab.json"),
                                             join_path(dir, "merges.txt"), dir);
  };
  auto spm = [&] {
    return SentencePieceTokenizer::from_model_file(
        join_path(dir, "sentencepiece.bpe.model"), dir,
        wants_camembert ? FairseqMapping::kCamembert : FairseqMapping::kXlmRoberta);
  };
  auto deberta = [&] {
    return SentencePieceTokenizer::from_deberta_model_file(join_path(dir, "spm.model"), dir);
  };
  std::unique_ptr<Tokenizer> t;
  if (wants_fast && has_json) {
    // A ModernBERT folder's byte-level BPE is the fast kind whatever its post-processor; another
    // folder's by its post-processor (RoBERTa's stays kByteLevelBpe, as its family declares).
    t = from_tokenizer_json(join_path(dir, "tokenizer.json"), dir, model_type == "modernbert");
  } else if (wants_deberta && has_deberta_spm) {
    t = deberta();
  } else if (wants_deberta && has_json) {
    t = from_tokenizer_json(join_path(dir, "tokenizer.json"), dir);
  } else if (wants_bpe && has_bpe) {
    t = bpe();
  } else if (wants_spm && has_spm) {
    t = spm();
  } else if (has_vocab_txt && !wants_bpe && !wants_spm) {
    t = std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_model_dir(dir));
  } else if (has_bpe && !wants_wordpiece && !wants_spm) {
    t = bpe();
  } else if (has_spm && !wants_wordpiece && !wants_bpe) {
    t = spm();
  } else if (has_deberta_spm && !wants_wordpiece && !wants_bpe && !wants_spm) {
    t = deberta();
  } else if (has_json) {
    t = from_tokenizer_json(join_path(dir, "tokenizer.json"), dir);
  } else if (has_vocab_txt) {
    t = std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_model_dir(dir));
  } else {
    throw_error("model folder ", dir,
                " has no tokenizer files (vocab.txt, vocab.json + merges.txt, "
                "sentencepiece.bpe.model, spm.model or tokenizer.json)",
                cls.empty() ? "" : "; tokenizer_config.json's tokenizer_class is " + cls);
  }
  // decode's clean_up_tokenization (transformers' default: on).
  const std::string config_path = join_path(dir, "tokenizer_config.json");
  t->set_clean_up_tokenization_spaces(
      tokenizer_detail::optional_bool(tokenizer_detail::optional_json_object(config_path),
                                      "clean_up_tokenization_spaces", config_path)
          .value_or(true));
  return t;
}

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  if (!path_exists(path)) throw_error(path, ": file not found");
  if (path.ends_with(".json")) return from_tokenizer_json(path, "");
  // spm.model is DeBERTa's name for it (DebertaV2Tokenizer's vocab file); any other .model is
  // read with XLM-R's ids.
  if (path == "spm.model" || path.ends_with("/spm.model")) {
    return SentencePieceTokenizer::from_deberta_model_file(path, "");
  }
  if (path.ends_with(".model")) {
    return SentencePieceTokenizer::from_model_file(path, "", FairseqMapping::kXlmRoberta);
  }
  return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_vocab_file(path));
}

std::vector<std::string> tokenizer_file_names(const std::string& model_dir) {
  std::vector<std::string> names;
  for (const char* name : kTokenizerFileNames) {
    if (path_exists(join_path(model_dir, name))) names.emplace_back(name);
  }
  return names;
}

std::vector<std::string> copy_tokenizer_files(const std::string& model_dir,
                                              const std::string& dest_dir) {
  const std::vector<std::string> names = tokenizer_file_names(model_dir);
  // Read everything first so that a failing read leaves nothing half-copied.
  std::vector<std::string> contents;
  for (const std::string& name : names) contents.push_back(read_file(join_path(model_dir, name)));
  make_directories(dest_dir);
  for (std::size_t i = 0; i < names.size(); ++i) {
    write_file_atomic(join_path(dest_dir, names[i]), contents[i]);
  }
  return names;
}

}  // namespace bertfit
