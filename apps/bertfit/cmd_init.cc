// `bertfit init`: a freshly initialised sequence or token classifier of any supported family as a
// Hugging Face model folder, from the HF defaults (or a config.json), key=value overrides, labels
// and a vocabulary.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "base/error.h"
#include "base/file.h"
#include "data/example.h"
#include "flags/groups.h"
#include "io/json.h"
#include "model/config.h"
#include "model/family.h"
#include "model/init.h"
#include "model/model_io.h"
#include "tokenizer/tokenizer.h"
#include "train/output_dir.h"

namespace bertfit::cli {
namespace {

using nlohmann::json;

struct InitOptions {
  const ModelFamily* arch = nullptr;  // unset: from --config's model_type
  std::string output;
  std::string config;
  std::vector<std::string> sets;
  std::string vocab;
  int num_labels = 0;               // 0: keep the config's labels
  std::vector<std::string> labels;  // names in id order (repeated and/or comma-separated)
  std::optional<HeadKind> task;     // unset: the config's architectures (default: sequence)
  std::uint64_t seed = 42;
  bool overwrite = false;
};

// The bert-base-uncased vocabulary of the reference folder (shared/data/vocab), looked up
// beside the current directory and beside every folder above the executable (a checkout's
// ../shared), so that neither a build path nor the working directory is baked in.
std::string default_vocab() {
  const std::string rel = "shared/data/vocab/bert-base-uncased.txt";
  std::vector<std::string> candidates = {"../" + rel};
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path())
      candidates.push_back((dir / rel).string());
  }
  for (const auto& c : candidates) {
    if (path_exists(c)) return c;
  }
  throw_error("no --vocab given and the default bert-base-uncased vocabulary (", rel,
              ") is not beside the current folder or above ", exe.parent_path().string(),
              "; pass --vocab FILE (a vocab.txt, one token per line)");
}

// The HF defaults of the architecture with the keys of the --config file laid over them.
json starting_config(const InitOptions& o) {
  if (o.config.empty()) {
    if (!o.arch) throw_error("give --arch (", model_type_list(), ") or --config FILE.json");
    return json::parse(model_config_to_json(ModelConfig::defaults(*o.arch)));
  }
  json file = read_json_file(o.config);
  if (!file.is_object() || !file.contains("model_type") || !file["model_type"].is_string()) {
    throw_error(o.config, ": missing key 'model_type'; add \"model_type\" (one of ",
                model_type_list(), ") to the file");
  }
  const std::string type = file["model_type"].get<std::string>();
  const ModelFamily& family = [&]() -> const ModelFamily& {
    try {
      return model_family(type);
    } catch (const Error& e) {
      throw Error(cat(o.config, ": ", e.what()));
    }
  }();
  if (o.arch && o.arch != &family) {
    throw_error("--arch ", o.arch->model_type, " disagrees with model_type '", type, "' in ",
                o.config);
  }
  json hf = json::parse(model_config_to_json(ModelConfig::defaults(family)));
  if (file.contains("id2label") || file.contains("label2id") || file.contains("num_labels")) {
    hf.erase("id2label");  // the file's labels replace the default two
    hf.erase("label2id");
  }
  for (const auto& [key, value] : file.items()) hf[key] = value;
  return hf;
}

void run_init(const InitOptions& o) {
  OutputDir out(o.output, o.overwrite, /*input_model=*/"", /*resume_from=*/"",
                /*resumable=*/false);
  json hf = starting_config(o);
  const bool vocab_size_in_file =
      !o.config.empty() && read_json_file(o.config).contains("vocab_size");
  bool vocab_size_set = false;
  for (const auto& s : o.sets) {
    apply_config_override(hf, s);
    vocab_size_set = vocab_size_set || s.rfind("vocab_size=", 0) == 0;
  }
  if (o.num_labels > 0) set_num_labels(hf, o.num_labels);
  std::vector<std::string> labels;
  for (const std::string& item : o.labels) {
    for (std::string& name : split_label_list(item)) {
      if (std::find(labels.begin(), labels.end(), name) != labels.end()) {
        throw_error("--labels names '", name, "' twice");
      }
      labels.push_back(std::move(name));
    }
  }
  if (!o.labels.empty()) {
    if (labels.empty()) throw_error("--labels names no label");
    if (o.num_labels > 0 && o.num_labels != static_cast<int>(labels.size())) {
      throw_error("--num-labels ", o.num_labels, " but --labels names ", labels.size());
    }
    json id2label = json::object(), label2id = json::object();
    for (std::size_t i = 0; i < labels.size(); ++i) {
      id2label[std::to_string(i)] = labels[i];
      label2id[labels[i]] = i;
    }
    hf["id2label"] = id2label;
    hf["label2id"] = label2id;
    hf.erase("num_labels");
  }
  // The head: config.json's architectures names its class (model/architecture.h).
  if (o.task) {
    hf["architectures"] = {model_family(hf["model_type"].get<std::string>()).class_for(*o.task)};
  }

  const std::string vocab_source = o.vocab.empty() ? default_vocab() : o.vocab;
  const std::string vocab_file = vocab_source;
  const std::unique_ptr<Tokenizer> tokenizer =
      is_directory(vocab_source) ? load_tokenizer(vocab_source) : load_tokenizer_file(vocab_source);
  const std::int64_t tokens = tokenizer->vocab_size();  // the largest id + 1
  if (!vocab_size_set && !vocab_size_in_file) hf["vocab_size"] = tokens;
  // The padding id is the tokenizer's [PAD] unless given (ModernBERT-base's default 50283 is
  // its own tokenizer's, beyond a smaller one's vocabulary).
  const bool pad_given =
      std::any_of(o.sets.begin(), o.sets.end(),
                  [](const std::string& s) { return s.rfind("pad_token_id=", 0) == 0; }) ||
      (!o.config.empty() && read_json_file(o.config).contains("pad_token_id"));
  if (!pad_given && tokenizer->pad_id() >= 0) hf["pad_token_id"] = tokenizer->pad_id();

  const std::string source = o.config.empty() ? "the --arch defaults with --set" : o.config;
  ModelConfig config = parse_model_config_json(hf, source);
  if (tokenizer->kind() != config.family->tokenizer) {
    throw_error("--vocab ", vocab_source, " holds a ", tokenizer_kind_name(tokenizer->kind()),
                " tokenizer but a ", config.model_type(), " model uses ",
                tokenizer_kind_name(config.family->tokenizer), " (give a folder with its files)");
  }
  if (vocab_size_set && config.vocab_size < tokens) {
    throw_error("--set vocab_size=", config.vocab_size, " is smaller than the ", tokens,
                " tokens of ", vocab_file);
  }
  if (!vocab_size_set && config.vocab_size != tokens) {
    throw_error(o.config, ": vocab_size ", config.vocab_size, " differs from the ", tokens,
                " tokens of ", vocab_file, "; pass a matching --vocab or --set vocab_size=N");
  }
  ModelState state(config);
  state.hf_config = hf;
  init_params(state.layout, config, o.seed, state.params.data());
  out.create();
  save_model(out.path(), state, vocab_source);
  out.commit();
  std::printf(
      "initialised %s (%s): %lld parameters (%d layers, hidden %d, %d heads, %d labels, "
      "seed %llu) -> %s\n",
      config.model_type(), config.family->class_for(config.head).c_str(),
      static_cast<long long>(state.layout.total()), config.layers, config.hidden, config.heads,
      config.num_labels, static_cast<unsigned long long>(o.seed), o.output.c_str());
}

}  // namespace

void add_init_command(CLI::App& app) {
  auto o = std::make_shared<InitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "init",
      "Write a freshly initialised sequence (or, with --task token-classification, token) "
      "classifier as a Hugging Face model folder "
      "(config.json, model.safetensors, the tokenizer's files), initialised as "
      "transformers does: normal(0, initializer_range) weights, zero biases, unit LayerNorm, a "
      "zero [PAD] embedding.");
  add_flags(
      *cmd,
      {{"--arch",
        "Architecture (model_type) at its base size, e.g. distilbert (distilbert-base) or bert "
        "(bert-base); optional with --config",
        family_target(o->arch)},
       {"--output", "Model folder to write (created if needed)", &o->output},
       {"--config",
        "Start from this HF config.json (a supported model_type); keys it lacks take the HF "
        "defaults",
        &o->config},
       {"--set",
        "Override a config key with its HF name, e.g. --set n_layers=2 --set "
        "hidden_act=gelu_new (value parsed as JSON, else taken as a string); repeatable",
        &o->sets},
       {"--vocab",
        "The tokenizer: a vocab.txt, or a folder holding the family's tokenizer files (vocab.txt; "
        "vocab.json + merges.txt; sentencepiece.bpe.model; spm.model; tokenizer.json, ModernBERT's "
        "only format); default: the "
        "bert-base-uncased vocabulary in shared/data/vocab beside the current folder or the "
        "binary's. vocab_size follows its largest id unless --set vocab_size=N",
        &o->vocab},
       {"--num-labels",
        "Number of labels (1: regression), named LABEL_0 .. LABEL_{N-1}; default: the config's",
        &o->num_labels},
       {"--labels",
        "Label names in id order, comma-separated and/or repeated (e.g. --labels "
        "B-PER,I-PER,O); default: the config's, or LABEL_0 .. with --num-labels",
        &o->labels},
       {"--task",
        "The head: sequence-classification (labels for the whole input) or "
        "token-classification (a label for every token, *ForTokenClassification)",
        choice_target(o->task, {{"sequence-classification", HeadKind::kSequenceClassification},
                                {"token-classification", HeadKind::kTokenClassification}})},
       {"--seed", "Random seed of the initialisation", &o->seed}});
  add_flags(*cmd, overwrite_flags(o->overwrite));
  cmd->get_option("--output")->required();
  // 0 stands for "not given" (the config's labels); a given count must be positive.
  cmd->get_option("--num-labels")->check(CLI::PositiveNumber)->default_str("");
  cmd->callback([o] { run_init(*o); });
}

}  // namespace bertfit::cli
