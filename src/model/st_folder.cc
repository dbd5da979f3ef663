// sentence-transformers folders: modules.json and each module's files read into a
// SentenceTransformerSpec, with the formats of sentence-transformers 2.2.2 (and the keys later
// versions add: pooling_mode_lasttoken, include_prompt, prompts, similarity_fn_name). Errors name
// the file and the key or module, and say what bertfit runs.
#include "model/st_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "io/json.h"
#include "model/config_reader.h"

namespace bertfit {
namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "bertfit runs a Transformer first, then one Pooling, then Dense modules, then an optional "
    "Normalize";

// The Transformer's config, under the names older sentence-transformers versions used too.
constexpr const char* kTransformerConfigs[] = {
    "sentence_bert_config.json",       "sentence_roberta_config.json",
    "sentence_distilbert_config.json", "sentence_camembert_config.json",
    "sentence_albert_config.json",     "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
};

enum class ModuleKind { kTransformer, kPooling, kDense, kNormalize, kOther };

// modules.json's "type" ("sentence_transformers.models.Pooling", or with the class repeated) ->
// the kind bertfit runs.
ModuleKind module_kind(const std::string& type) {
  static const std::pair<const char*, ModuleKind> kinds[] = {
      {"Transformer", ModuleKind::kTransformer},
      {"Pooling", ModuleKind::kPooling},
      {"Dense", ModuleKind::kDense},
      {"Normalize", ModuleKind::kNormalize}};
  const std::string prefix = "sentence_transformers.models.";
  for (const auto& [name, kind] : kinds) {
    if (type == prefix + name || type == prefix + name + "." + name) return kind;
  }
  return ModuleKind::kOther;
}

json read_object(const std::string& path) {
  json j = read_json_file(path);
  if (!j.is_object()) throw_error(path, ": must be a JSON object, found ", j.type_name());
  return j;
}

void reject_unknown_keys(const json& j, const std::vector<std::string>& known,
                         const std::string& source, const char* what) {
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw_error(source, ": key '", key, "' is not a ", what, " setting bertfit knows (", list,
                  ")");
    }
  }
}

// A module folder inside dir; modules.json may not point outside it.
std::string module_dir(const std::string& dir, const std::string& path, const std::string& source) {
  std::filesystem::path p(path);
  bool escapes = p.is_absolute() ||
                 std::any_of(p.begin(), p.end(), [](const auto& part) { return part == ".."; });
  if (escapes) throw_error(source, ": key 'path' value '", path, "' leaves the model folder");
  return path.empty() ? dir : join_path(dir, path);
}

void read_pooling(const std::string& file, SentenceTransformerSpec& spec) {
  const json j = read_object(file);
  reject_unknown_keys(
      j,
      {"word_embedding_dimension", "pooling_mode", "pooling_mode_cls_token",
       "pooling_mode_max_tokens", "pooling_mode_mean_tokens", "pooling_mode_mean_sqrt_len_tokens",
       "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken", "include_prompt"},
      file, "Pooling");
  const ConfigReader r(j, file);
  spec.word_embedding_dimension = r.integer("word_embedding_dimension", 1);
  // Pooling's constructor defaults: mean on, everything else off.
  bool cls = r.bool_or("pooling_mode_cls_token", false);
  bool max = r.bool_or("pooling_mode_max_tokens", false);
  bool mean = r.bool_or("pooling_mode_mean_tokens", true);
  bool sqrt_len = r.bool_or("pooling_mode_mean_sqrt_len_tokens", false);
  bool weighted = r.bool_or("pooling_mode_weightedmean_tokens", false);
  bool last = r.bool_or("pooling_mode_lasttoken", false);
  if (r.has("pooling_mode")) {  // a single mode by name overrides the flags
    std::string mode = json_string(j, "pooling_mode", file);
    std::transform(mode.begin(), mode.end(), mode.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    cls = mode == "cls";
    max = mode == "max";
    mean = mode == "mean";
    sqrt_len = mode == "mean_sqrt_len_tokens";
    weighted = mode == "weightedmean";
    last = mode == "lasttoken";
    if (!(cls || max || mean || sqrt_len || weighted || last)) {
      throw_error(file, ": key 'pooling_mode' value '", mode,
                  "' is not one of cls, lasttoken, max, mean, mean_sqrt_len_tokens, weightedmean");
    }
  }
  if (weighted) {
    throw_error(file,
                ": weighted-mean pooling (pooling_mode_weightedmean_tokens) is not supported; "
                "bertfit pools cls, max, mean, mean_sqrt_len_tokens and lasttoken");
  }
  // Pooling.forward's concatenation order.
  spec.pooling.clear();
  if (cls) spec.pooling.push_back(Pooling::kCls);
  if (max) spec.pooling.push_back(Pooling::kMax);
  if (mean) spec.pooling.push_back(Pooling::kMean);
  if (sqrt_len) spec.pooling.push_back(Pooling::kMeanSqrtLen);
  if (last) spec.pooling.push_back(Pooling::kLastToken);
  if (spec.pooling.empty())
    throw_error(file, ": no pooling mode is set (every pooling_mode_* is false)");
  spec.include_prompt = r.bool_or("include_prompt", true);
}

// The torch class sentence-transformers 2.2.2 writes for an activation.
std::string dense_activation_class(DenseActivation a) {
  switch (a) {
    case DenseActivation::kTanh:
      return "torch.nn.modules.activation.Tanh";
    case DenseActivation::kIdentity:
      return "torch.nn.modules.linear.Identity";
    case DenseActivation::kRelu:
      return "torch.nn.modules.activation.ReLU";
    case DenseActivation::kGelu:
      return "torch.nn.modules.activation.GELU";
  }
  return "?";
}

DenseActivation parse_activation(const std::string& name, const std::string& file) {
  static const std::pair<const char*, DenseActivation> names[] = {
      {"torch.nn.modules.activation.Tanh", DenseActivation::kTanh},
      {"torch.nn.Tanh", DenseActivation::kTanh},
      {"torch.nn.modules.linear.Identity", DenseActivation::kIdentity},
      {"torch.nn.Identity", DenseActivation::kIdentity},
      {"torch.nn.modules.activation.ReLU", DenseActivation::kRelu},
      {"torch.nn.ReLU", DenseActivation::kRelu},
      {"torch.nn.modules.activation.GELU", DenseActivation::kGelu},
      {"torch.nn.GELU", DenseActivation::kGelu},
  };
  for (const auto& [n, a] : names) {
    if (name == n) return a;
  }
  throw_error(file, ": key 'activation_function' value '", name,
              "' is not supported (torch.nn.modules.activation.Tanh, "
              "torch.nn.modules.linear.Identity, torch.nn.modules.activation.ReLU, "
              "torch.nn.modules.activation.GELU)");
}

DenseModule read_dense(const std::string& folder, const std::string& path, int in_width) {
  const std::string file = join_path(folder, "config.json");
  const json j = read_object(file);
  reject_unknown_keys(j, {"in_features", "out_features", "bias", "activation_function"}, file,
                      "Dense");
  const ConfigReader r(j, file);
  DenseModule d;
  d.in_features = r.integer("in_features", 1);
  d.out_features = r.integer("out_features", 1);
  d.bias = r.bool_or("bias", true);
  d.activation_name = json_string(j, "activation_function", file);
  d.activation = parse_activation(d.activation_name, file);
  d.path = path;
  if (d.in_features != in_width) {
    throw_error(file, ": key 'in_features' is ", d.in_features, " but the module before it gives ",
                in_width, " values");
  }
  for (const char* name : {"model.safetensors", "pytorch_model.bin"}) {
    if (path_exists(join_path(folder, name))) {
      d.weights_file = join_path(folder, name);
      break;
    }
  }
  if (d.weights_file.empty()) {
    throw_error(folder,
                ": the Dense module has no weights (model.safetensors or pytorch_model.bin)");
  }
  return d;
}

// An empty object, null, or one holding only trust_remote_code (which sentence-transformers drops).
bool is_inert_args(const json& v) {
  if (v.is_null()) return true;
  if (!v.is_object()) return false;
  for (const auto& [key, value] : v.items()) {
    if (key != "trust_remote_code") return false;
  }
  return true;
}

void read_transformer_config(const std::string& folder, SentenceTransformerSpec& spec) {
  std::string file;
  for (const char* name : kTransformerConfigs) {
    if (path_exists(join_path(folder, name))) {
      file = join_path(folder, name);
      break;
    }
  }
  if (file.empty()) return;  // newer sentence-transformers load without it: no settings
  const json j = read_object(file);
  for (const auto& [key, value] : j.items()) {
    const bool read = key == "max_seq_length" || key == "do_lower_case";
    const bool ignored =
        key == "cache_dir" || key == "backend" ||
        ((key == "model_args" || key == "tokenizer_args" || key == "config_args") &&
         is_inert_args(value)) ||
        (key == "tokenizer_name_or_path" && value.is_null());
    if (!read && !ignored) {
      throw_error(file, ": key '", key, "' is not supported (bertfit reads max_seq_length and ",
                  "do_lower_case; model_args, tokenizer_args and config_args must be empty)");
    }
  }
  const ConfigReader r(j, file);
  if (r.has("max_seq_length")) spec.max_seq_length = r.integer("max_seq_length", 1);
  spec.do_lower_case = r.has("do_lower_case") && json_bool(j, "do_lower_case", file);
}

void read_st_config(const std::string& dir, SentenceTransformerSpec& spec) {
  const std::string file = join_path(dir, "config_sentence_transformers.json");
  if (!path_exists(file)) return;  // written since sentence-transformers 2.0
  const json j = read_object(file);
  const ConfigReader r(j, file);
  const std::string st_type = r.has("model_type") ? json_string(j, "model_type", file) : "";
  if (!st_type.empty() && st_type != "SentenceTransformer") {
    throw_error(file, ": key 'model_type' value '", st_type,
                "' is not supported (bertfit reads SentenceTransformer folders)");
  }
  if (r.has("prompts")) {
    const json& prompts = j["prompts"];
    if (!prompts.is_object()) {
      throw_error(file, ": key 'prompts' must be an object {\"name\": \"text\", ...}, found ",
                  prompts.dump());
    }
    for (const auto& [name, text] : prompts.items()) {
      if (!text.is_string()) {
        throw_error(file, ": key 'prompts' value for \"", name, "\" must be a string, found ",
                    text.dump());
      }
      spec.prompts[name] = text.get<std::string>();
    }
  }
  if (r.has("default_prompt_name")) {
    spec.default_prompt_name = json_string(j, "default_prompt_name", file);
    if (!spec.default_prompt_name.empty() && !spec.prompts.count(spec.default_prompt_name)) {
      throw_error(file, ": key 'default_prompt_name' value '", spec.default_prompt_name,
                  "' is not a key of 'prompts'");
    }
  }
  if (r.has("similarity_fn_name")) {
    spec.similarity_fn_name = json_string(j, "similarity_fn_name", file);
    const std::string& s = spec.similarity_fn_name;
    if (s != "cosine" && s != "dot" && s != "euclidean" && s != "manhattan") {
      throw_error(file, ": key 'similarity_fn_name' value '", s,
                  "' is not one of cosine, dot, euclidean, manhattan");
    }
  }
}

}  // namespace

std::optional<SentenceTransformerSpec> read_sentence_transformer(const std::string& dir) {
  const std::string modules_file = join_path(dir, "modules.json");
  if (!path_exists(modules_file)) return std::nullopt;
  const json modules = read_json_file(modules_file);
  if (!modules.is_array() || modules.empty()) {
    throw_error(modules_file, ": must be a non-empty JSON array of modules, found ",
                modules.dump().substr(0, 40));
  }
  SentenceTransformerSpec spec;
  // Modules run in the list's order (sentence-transformers ignores "idx"); bertfit runs
  // Transformer, Pooling, Dense*, Normalize?, which the kinds must follow.
  ModuleKind previous = ModuleKind::kOther;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const json& entry = modules[i];
    const std::string source = cat(modules_file, " module ", i);
    if (!entry.is_object()) throw_error(source, ": must be an object, found ", entry.dump());
    const std::string name = json_string(entry, "name", source);
    const std::string type = json_string(entry, "type", source);
    const std::string path = json_string(entry, "path", source);
    const std::string folder = module_dir(dir, path, source);
    const ModuleKind kind = module_kind(type);
    const std::string what = cat(modules_file, ": module ", i, " ('", name, "', ", type, ")");
    if (kind == ModuleKind::kOther) throw_error(what, " is not supported: ", kSupported);
    if (entry.contains("kwargs") && !entry["kwargs"].empty()) {
      throw_error(what, " takes kwargs ", entry["kwargs"].dump(), ", which bertfit does not pass");
    }
    bool in_place = false;
    switch (kind) {
      case ModuleKind::kTransformer:
        in_place = i == 0;
        break;
      case ModuleKind::kPooling:
        in_place = previous == ModuleKind::kTransformer;
        break;
      case ModuleKind::kDense:
        in_place = previous == ModuleKind::kPooling || previous == ModuleKind::kDense;
        break;
      case ModuleKind::kNormalize:
        in_place = previous == ModuleKind::kPooling || previous == ModuleKind::kDense;
        break;
      case ModuleKind::kOther:
        break;
    }
    if (!in_place) throw_error(what, " is out of place: ", kSupported);
    switch (kind) {
      case ModuleKind::kTransformer:
        spec.transformer_path = path;
        read_transformer_config(folder, spec);
        break;
      case ModuleKind::kPooling:
        read_pooling(join_path(folder, "config.json"), spec);
        break;
      case ModuleKind::kDense:
        spec.dense.push_back(read_dense(folder, path, sentence_embedding_dimension(spec)));
        break;
      case ModuleKind::kNormalize:
        spec.normalize = true;  // Normalize saves nothing: its folder may be absent
        break;
      case ModuleKind::kOther:
        break;
    }
    previous = kind;
  }
  if (previous == ModuleKind::kTransformer) {
    throw_error(modules_file, ": has no Pooling module: ", kSupported);
  }
  read_st_config(dir, spec);
  return spec;
}

int sentence_embedding_dimension(const SentenceTransformerSpec& spec) {
  if (!spec.dense.empty()) return spec.dense.back().out_features;
  return static_cast<int>(spec.pooling.size()) * spec.word_embedding_dimension;
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "cls") return Pooling::kCls;
  if (name == "mean") return Pooling::kMean;
  if (name == "max") return Pooling::kMax;
  if (name == "mean_sqrt_len") return Pooling::kMeanSqrtLen;
  if (name == "last_token" || name == "last-token") return Pooling::kLastToken;
  return std::nullopt;
}

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::kCls:
      return "cls";
    case Pooling::kMean:
      return "mean";
    case Pooling::kMax:
      return "max";
    case Pooling::kMeanSqrtLen:
      return "mean_sqrt_len";
    case Pooling::kLastToken:
      return "last_token";
  }
  return "?";
}

const char* dense_activation_name(DenseActivation activation) {
  switch (activation) {
    case DenseActivation::kTanh:
      return "tanh";
    case DenseActivation::kIdentity:
      return "identity";
    case DenseActivation::kRelu:
      return "relu";
    case DenseActivation::kGelu:
      return "gelu";
  }
  return "?";
}

}  // namespace bertfit

namespace bertfit {

void write_sentence_transformer(const std::string& dir, const SentenceTransformerSpec& spec) {
  CHECK(spec.transformer_path.empty(), "a Transformer module in ", spec.transformer_path);
  auto module = [](int idx, const std::string& path, const char* type) {
    return json{{"idx", idx},
                {"name", std::to_string(idx)},
                {"path", path},
                {"type", std::string("sentence_transformers.models.") + type}};
  };
  json modules = json::array({module(0, "", "Transformer"), module(1, "1_Pooling", "Pooling")});
  for (std::size_t i = 0; i < spec.dense.size(); ++i) {
    modules.push_back(module(static_cast<int>(i) + 2, dense_module_path(i), "Dense"));
  }
  const int normalize_idx = static_cast<int>(spec.dense.size()) + 2;
  const std::string normalize_path = std::to_string(normalize_idx) + "_Normalize";
  if (spec.normalize) modules.push_back(module(normalize_idx, normalize_path, "Normalize"));
  auto has = [&](Pooling p) {
    return std::find(spec.pooling.begin(), spec.pooling.end(), p) != spec.pooling.end();
  };
  // 2.2.2's keys (its Pooling takes no others); last-token pooling came later, written only when
  // used (such a model needs a later version anyway).
  json pooling = {{"word_embedding_dimension", spec.word_embedding_dimension},
                  {"pooling_mode_cls_token", has(Pooling::kCls)},
                  {"pooling_mode_mean_tokens", has(Pooling::kMean)},
                  {"pooling_mode_max_tokens", has(Pooling::kMax)},
                  {"pooling_mode_mean_sqrt_len_tokens", has(Pooling::kMeanSqrtLen)}};
  if (has(Pooling::kLastToken)) pooling["pooling_mode_lasttoken"] = true;
  json bert_config = {{"do_lower_case", spec.do_lower_case}};
  if (spec.max_seq_length) bert_config["max_seq_length"] = *spec.max_seq_length;
  json st_config = {{"__version__", {{"sentence_transformers", "2.2.2"}}}};
  if (!spec.prompts.empty()) st_config["prompts"] = spec.prompts;
  if (!spec.default_prompt_name.empty()) {
    st_config["default_prompt_name"] = spec.default_prompt_name;
  }
  if (spec.similarity_fn_name != "cosine")
    st_config["similarity_fn_name"] = spec.similarity_fn_name;
  make_directories(join_path(dir, "1_Pooling"));
  write_file_atomic(join_path(dir, "1_Pooling/config.json"), pooling.dump(2) + "\n");
  for (std::size_t i = 0; i < spec.dense.size(); ++i) {
    const DenseModule& d = spec.dense[i];
    const json dense = {
        {"in_features", d.in_features},
        {"out_features", d.out_features},
        {"bias", d.bias},
        {"activation_function",
         d.activation_name.empty() ? dense_activation_class(d.activation) : d.activation_name}};
    const std::string folder = join_path(dir, dense_module_path(i));
    make_directories(folder);
    write_file_atomic(join_path(folder, "config.json"), dense.dump(2) + "\n");
  }
  if (spec.normalize) make_directories(join_path(dir, normalize_path));
  write_file_atomic(join_path(dir, "sentence_bert_config.json"), bert_config.dump(2) + "\n");
  write_file_atomic(join_path(dir, "config_sentence_transformers.json"), st_config.dump(2) + "\n");
  write_file_atomic(join_path(dir, "modules.json"), modules.dump(2) + "\n");
}

}  // namespace bertfit
