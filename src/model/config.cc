// ModelConfig from and to Hugging Face config.json (DistilBertConfig / BertConfig keys), with
// errors that name the file and the key, and key=value overrides for `bertfit init --set`.
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "io/json.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace bertfit {
namespace {

using nlohmann::json;

constexpr const char* kTransformersVersion = "4.28.1";

const std::vector<std::string> kLabelKeys = {"num_labels", "id2label", "label2id", "problem_type"};

}  // namespace

int ConfigReader::integer(const char* key, int min) const {
  int v = json_int(j_, key, source_);
  if (v < min) throw_error(source_, ": key '", key, "' must be at least ", min, ", found ", v);
  return v;
}

int ConfigReader::integer_or(const char* key, int fallback, int min) const {
  return j_.contains(key) ? integer(key, min) : fallback;
}

double ConfigReader::probability_or(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  double p = json_number(j_, key, source_);
  if (!(p >= 0.0 && p < 1.0)) {
    throw_error(source_, ": key '", key, "' must be a probability in [0, 1), found ", p);
  }
  return p;
}

double ConfigReader::non_negative_or(const char* key, double fallback,
                                     bool strictly_positive) const {
  if (!j_.contains(key)) return fallback;
  double v = json_number(j_, key, source_);
  if (!(strictly_positive ? v > 0.0 : v >= 0.0) || !std::isfinite(v)) {
    throw_error(source_, ": key '", key, "' must be ", strictly_positive ? "positive" : ">= 0",
                ", found ", v);
  }
  return v;
}

std::string ConfigReader::string_or(const char* key, const std::string& fallback) const {
  return j_.contains(key) ? json_string(j_, key, source_) : fallback;
}

bool ConfigReader::bool_or(const char* key, bool fallback) const {
  return j_.contains(key) ? json_bool(j_, key, source_) : fallback;
}

namespace {

Activation parse_activation(const std::string& name, const char* key, const std::string& source) {
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::kGeluNew;
  if (name == "relu") return Activation::kRelu;
  throw_error(source, ": key '", key, "' value '", name,
              "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)");
}

}  // namespace

Activation ConfigReader::activation_or(const char* key, Activation fallback) const {
  return has(key) ? parse_activation(string_or(key, ""), key, source_) : fallback;
}

namespace {

std::vector<std::string> generic_labels(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("LABEL_" + std::to_string(i));
  return names;
}

// "0" .. "n-1" (decimal, no sign or leading zeros) -> id, else -1.
int label_id(const std::string& key, std::size_t n) {
  if (key.empty() || key.size() > 9 || (key.size() > 1 && key[0] == '0')) return -1;
  if (!std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return -1;
  }
  std::size_t id = std::stoul(key);
  return id < n ? static_cast<int>(id) : -1;
}

void parse_labels(const json& j, const std::string& source, ModelConfig& c) {
  ConfigReader r(j, source);
  std::vector<std::string> names;
  if (r.has("id2label")) {
    const json& m = j["id2label"];
    if (!m.is_object() || m.empty()) {
      throw_error(source, ": key 'id2label' must be a non-empty object {\"0\": \"name\", ...}");
    }
    names.resize(m.size());
    std::vector<bool> seen(m.size(), false);
    for (const auto& [key, value] : m.items()) {
      int id = label_id(key, m.size());
      if (id < 0 || seen[id]) {
        throw_error(source, ": key 'id2label' has the key \"", key, "\"; expected \"0\" .. \"",
                    m.size() - 1, "\", each once");
      }
      if (!value.is_string())
        throw_error(source, ": key 'id2label' value for \"", key, "\" must be a string");
      seen[id] = true;
      names[id] = value.get<std::string>();
    }
    if (j.contains("num_labels") && r.integer("num_labels", 1) != static_cast<int>(names.size())) {
      throw_error(source, ": key 'num_labels' (", r.integer("num_labels", 1),
                  ") disagrees with the ", names.size(), " entries of 'id2label'");
    }
  } else if (j.contains("num_labels")) {
    names = generic_labels(r.integer("num_labels", 1));
  } else if (!r.has("label2id")) {
    names = generic_labels(2);  // PretrainedConfig's default
  }
  if (r.has("label2id")) {
    const json& m = j["label2id"];
    if (!m.is_object() || m.empty()) {
      throw_error(source, ": key 'label2id' must be a non-empty object {\"name\": 0, ...}");
    }
    const bool derive = names.empty();  // no id2label / num_labels: take the names from here
    if (derive) names.resize(m.size());
    if (m.size() != names.size()) {
      throw_error(source, ": key 'label2id' has ", m.size(), " entries but there are ",
                  names.size(), " labels (id2label)");
    }
    for (const auto& [name, value] : m.items()) {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
          value.get<std::int64_t>() >= static_cast<std::int64_t>(names.size())) {
        throw_error(source, ": key 'label2id' value for \"", name, "\" must be an id in [0, ",
                    names.size(), "), found ", value.dump());
      }
      auto id = value.get<std::size_t>();
      if (derive && names[id].empty()) names[id] = name;
      if (names[id] != name) {
        throw_error(source, ": key 'label2id' maps \"", name, "\" to ", id,
                    " but 'id2label' names id ", id, " \"", names[id], "\"");
      }
    }
  }
  c.num_labels = static_cast<int>(names.size());
  c.id2label = std::move(names);

  c.problem_type = r.has("problem_type") ? json_string(j, "problem_type", source) : "";
  if (c.problem() == ProblemType::kRegression && c.num_labels != 1) {
    throw_error(source, ": key 'problem_type' regression needs exactly 1 label, found ",
                c.num_labels, " (multi-output regression is not supported)");
  }
  if (c.problem_type == "single_label_classification" && c.num_labels < 2) {
    throw_error(source, ": key 'problem_type' single_label_classification needs at least 2 ",
                "labels, found ", c.num_labels);
  }
  if (!c.problem_type.empty() && c.problem_type != "regression" &&
      c.problem_type != "single_label_classification" &&
      c.problem_type != "multi_label_classification") {
    throw_error(source, ": key 'problem_type' value '", c.problem_type,
                "' is not one of regression, single_label_classification, "
                "multi_label_classification");
  }
}

bool contains(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

}  // namespace

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kRelu:
      return "relu";
  }
  return "?";
}

ModelConfig ModelConfig::defaults(const ModelFamily& family) {
  ModelConfig c;
  c.family = &family;
  c.vocab_size = 30522;
  c.hidden = 768;
  c.heads = 12;
  c.intermediate = 3072;
  c.max_positions = 512;
  c.activation = Activation::kGelu;
  c.layer_norm_eps = 1e-12;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  c.num_labels = 2;
  c.id2label = generic_labels(2);
  c.problem_type = "";
  c.pad_token_id = 0;
  c.initializer_range = 0.02;
  family.defaults(c);
  return c;
}

const char* ModelConfig::model_type() const { return family->model_type; }

bool ModelConfig::token_types() const {
  return family->embeddings.token_type != nullptr && type_vocab_size > 0;
}

int ModelConfig::max_tokens() const {
  return family->position_ids == PositionIds::kAfterPadding ? max_positions - pad_token_id - 1
                                                            : max_positions;
}

ModelConfig parse_model_config_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw_error(source, ": a model config must be a JSON object");
  if (!j.contains("model_type")) {
    throw_error(source, ": missing key 'model_type'; bertfit reads configs as transformers ",
                "saves them: add \"model_type\" (one of ", model_type_list(),
                ") (the original Google bert_config.json has no model_type)");
  }
  const std::string type = json_string(j, "model_type", source);
  const ModelFamily& family = [&]() -> const ModelFamily& {
    try {
      return model_family(type);
    } catch (const Error& e) {
      throw Error(cat(source, ": ", e.what()));
    }
  }();
  const ConfigKeyNames& k = family.keys;
  ConfigReader r(j, source);
  ModelConfig c = ModelConfig::defaults(family);

  c.vocab_size = r.integer("vocab_size", 1);
  c.hidden = r.integer(k.hidden, 1);
  c.layers = r.integer(k.layers, 1);
  c.heads = r.integer(k.heads, 1);
  c.intermediate = r.integer(k.intermediate, 1);
  if (c.hidden % c.heads != 0) {
    throw_error(source, ": key '", k.hidden, "' (", c.hidden, ") must be divisible by '", k.heads,
                "' (", c.heads, ")");
  }
  c.max_positions = r.integer_or("max_position_embeddings", c.max_positions, 1);
  c.activation = parse_activation(r.string_or(k.activation, "gelu"), k.activation, source);
  c.hidden_dropout = r.probability_or(k.hidden_dropout, c.hidden_dropout);
  c.attention_dropout = r.probability_or(k.attention_dropout, c.attention_dropout);
  c.initializer_range = r.non_negative_or("initializer_range", c.initializer_range, false);
  c.pad_token_id = r.integer_or("pad_token_id", c.pad_token_id, 0);
  if (c.pad_token_id >= c.vocab_size) {
    throw_error(source, ": key 'pad_token_id' (", c.pad_token_id, ") must be below vocab_size (",
                c.vocab_size, ")");
  }
  family.read_keys(r, c);
  if (architecture_of(j, family, source) == family.class_for(HeadKind::kTokenClassification)) {
    c.head = HeadKind::kTokenClassification;
  }
  parse_labels(j, source, c);  // after the head: a token head's problem type is single-label
  c.other_architecture = other_architecture(j, family, c.head, source);
  return c;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  return parse_model_config_json(parse_json_text(json_text, source), source);
}

ModelConfig load_model_config(const std::string& path) {
  return parse_model_config(read_file(path), path);
}

void set_num_labels(json& hf_json, int num_labels) {
  if (num_labels < 1) throw_error("num_labels must be at least 1, got ", num_labels);
  json id2label = json::object(), label2id = json::object();
  for (int i = 0; i < num_labels; ++i) {
    id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    label2id["LABEL_" + std::to_string(i)] = i;
  }
  hf_json["id2label"] = std::move(id2label);
  hf_json["label2id"] = std::move(label2id);
  hf_json.erase("num_labels");
}

void apply_config_override(json& hf_json, const std::string& key_value) {
  auto eq = key_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw_error("config override '", key_value, "' must look like key=value");
  }
  const std::string key = key_value.substr(0, eq);
  const std::string text = key_value.substr(eq + 1);
  if (!hf_json.is_object() || !hf_json.contains("model_type") ||
      !hf_json["model_type"].is_string()) {
    throw_error("cannot apply '", key_value, "': the config has no model_type");
  }
  const std::string type = hf_json["model_type"].get<std::string>();
  const std::vector<std::string>& arch_keys = model_family(type).config_keys;
  if (key == "model_type") {
    throw_error("config override '", key_value, "': model_type cannot be changed (use --arch)");
  }
  if (!contains(arch_keys, key) && !contains(kLabelKeys, key) && !hf_json.contains(key)) {
    std::string known;
    for (const auto& name : arch_keys) known += (known.empty() ? "" : ", ") + name;
    for (const auto& name : kLabelKeys) known += ", " + name;
    throw_error("unknown config key '", key, "' for model_type ", type, " (known keys: ", known,
                ")");
  }
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // not JSON: a plain string such as gelu_new
  if (key == "num_labels") {
    if (!value.is_number_integer()) {
      throw_error("config override '", key_value, "': num_labels must be an integer");
    }
    set_num_labels(hf_json, value.get<int>());
    return;
  }
  hf_json[key] = std::move(value);
}

std::string model_config_to_json(const ModelConfig& c) {
  return model_config_to_json(c, json::object());
}

std::string model_config_to_json(const ModelConfig& c, const json& original) {
  json j = original.is_object() ? original : json::object();
  for (const char* derived : {"num_labels", "problem_type", "torch_dtype"}) j.erase(derived);
  const ConfigKeyNames& k = c.family->keys;
  j["model_type"] = c.family->model_type;
  j["architectures"] = {c.family->class_for(c.head)};
  j["vocab_size"] = c.vocab_size;
  j[k.hidden] = c.hidden;
  j[k.layers] = c.layers;
  j[k.heads] = c.heads;
  j[k.intermediate] = c.intermediate;
  j["max_position_embeddings"] = c.max_positions;
  j[k.activation] = activation_name(c.activation);
  j[k.hidden_dropout] = c.hidden_dropout;
  j[k.attention_dropout] = c.attention_dropout;
  j["initializer_range"] = c.initializer_range;
  j["pad_token_id"] = c.pad_token_id;
  json id2label = json::object(), label2id = json::object();
  for (int i = 0; i < c.num_labels; ++i) {
    std::string name =
        i < static_cast<int>(c.id2label.size()) ? c.id2label[i] : "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  j["id2label"] = std::move(id2label);
  j["label2id"] = std::move(label2id);
  if (!c.problem_type.empty()) j["problem_type"] = c.problem_type;
  j["transformers_version"] = kTransformersVersion;
  c.family->write_keys(c, j);
  return j.dump(2) + "\n";
}

}  // namespace bertfit
