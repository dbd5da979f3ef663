// Loading and saving Hugging Face model folders through the flat parameter buffer: choosing the
// weights file, checkpoint matching (prefixes, missing heads, extra tensors), config.json,
// safetensors, tokenizer files.
#include "model/model_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "io/json.h"
#include "io/mapped_file.h"
#include "model/architecture.h"
#include "model/family.h"
#include "model/head.h"
#include "model/init.h"
#include "model/st_weights.h"

namespace bertfit {
namespace {

using nlohmann::json;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// "classifier.weight" -> "classifier".
std::string module_of(const std::string& name) { return name.substr(0, name.rfind('.')); }

std::string join(const std::vector<std::string>& items, std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < max_items; ++i) {
    out += (i ? ", " : "") + items[i];
  }
  if (items.size() > max_items) out += cat(", ... (", items.size() - max_items, " more)");
  return out;
}

// A hint for a missing tensor when the file seems to hold another family's model.
std::string arch_hint(const Checkpoint& checkpoint, const ModelConfig& config) {
  for (const ModelFamily* other : model_families()) {
    if (other == config.family) continue;
    const std::string prefix = other->base_prefix;
    for (const auto& t : checkpoint.tensors()) {
      if (starts_with(t.name, prefix)) {
        return cat(" (the checkpoint holds '", prefix.substr(0, prefix.size() - 1),
                   ".*' tensors but config.json says model_type ", config.model_type(), ")");
      }
    }
  }
  return "";
}

}  // namespace

CheckpointMatch match_checkpoint(const Checkpoint& checkpoint, const ParamLayout& layout,
                                 const ModelConfig& config, bool reinit_mismatched_head) {
  const std::string prefix = config.family->base_prefix;
  CheckpointMatch match;
  bool any_prefixed = false;
  for (const auto& t : checkpoint.tensors()) {
    any_prefixed = any_prefixed || starts_with(t.name, prefix);
  }
  // The base model's own names (BertModel, ModernBertModel: what sentence-transformers saves):
  // the family's word embeddings without the prefix.
  const EmbeddingNames& emb = config.family->embeddings;
  const std::string word = std::string(emb.prefix).substr(prefix.size()) + emb.word + ".weight";
  match.base_model_names = !any_prefixed && checkpoint.find(word);
  auto checkpoint_name = [&](const std::string& name) {
    return match.base_model_names && starts_with(name, prefix) ? name.substr(prefix.size()) : name;
  };

  std::set<std::string> used;
  std::set<std::string> head_present;
  std::vector<std::string> head_absent;  // in layout order
  // A checkpoint of another class (config.json's architectures) holds no sequence-classifier
  // head: its tensors of the same names (a token classifier's classifier.*) are another head's.
  // Head modules of the base model (BERT's pooler) are still read.
  const bool other_head = !config.other_architecture.empty();
  for (const ParamEntry& e : layout.entries()) {
    if (is_dense_role(e.role)) {  // in the Dense module's own file (load_dense_tensors)
      match.names.emplace_back();
      continue;
    }
    const std::string name = checkpoint_name(e.name);
    const bool head = e.layer == layout.num_layers();
    const bool task_head = head && !starts_with(e.name, prefix);
    const CheckpointTensor* t = other_head && task_head ? nullptr : checkpoint.find(name);
    if (t == nullptr) {
      if (!head) {
        throw_error(checkpoint.path(), ": tensor '", name, "' is missing; config.json describes a ",
                    config.model_type(), " with ", config.layers, " layers, hidden ", config.hidden,
                    ", intermediate ", config.intermediate, arch_hint(checkpoint, config));
      }
      if (std::find(head_absent.begin(), head_absent.end(), module_of(name)) == head_absent.end()) {
        head_absent.push_back(module_of(name));
      }
      match.names.emplace_back();
      continue;
    }
    used.insert(name);
    const bool classifier = e.role == Role::kClsW || e.role == Role::kClsB;
    if (t->shape != e.shape && classifier && reinit_mismatched_head) {
      match.mismatched.push_back(cat(name, ": found shape ", t->shape.str(),
                                     " in the checkpoint and ", e.shape.str(), " in the model"));
      match.names.emplace_back();
      continue;
    }
    match.names.push_back(name);
    if (head) head_present.insert(module_of(name));
    if (t->shape != e.shape) {
      throw_error(t->file, ": tensor '", name, "' has shape ", t->shape.str(), ", expected ",
                  e.shape.str(), " from config.json");
    }
    if (!is_floating(t->dtype)) {
      throw_error(t->file, ": tensor '", name, "' has dtype ", safetensors_dtype_name(t->dtype),
                  ", expected a floating-point tensor");
    }
  }
  for (const auto& m : head_absent) {
    if (head_present.count(m)) {
      throw_error(checkpoint.path(), ": module '", m,
                  "' is incomplete (its weight or its bias is missing)");
    }
    match.initialised.push_back(m);
  }
  for (const auto& t : checkpoint.tensors()) {
    if (!used.count(t.name) && is_floating(t.dtype)) match.ignored.push_back(t.name);
  }
  return match;
}

namespace {

struct WeightsFile {
  const char* name;
  bool sharded;
  CheckpointFormat format;
};

// transformers' order of preference (modeling_utils.py, PreTrainedModel.from_pretrained).
constexpr WeightsFile kWeightsFiles[] = {
    {"model.safetensors", false, CheckpointFormat::kSafetensors},
    {"model.safetensors.index.json", true, CheckpointFormat::kSafetensors},
    {"pytorch_model.bin", false, CheckpointFormat::kPytorch},
    {"pytorch_model.bin.index.json", true, CheckpointFormat::kPytorch},
};

const WeightsFile* find_weights(const std::string& dir) {
  if (!path_exists(dir)) throw_error(dir, ": model folder not found");
  if (!is_directory(dir)) {
    throw_error(dir, ": not a folder; expected a Hugging Face model folder with config.json and ",
                "model.safetensors (or pytorch_model.bin)");
  }
  for (const WeightsFile& w : kWeightsFiles) {
    if (path_exists(join_path(dir, w.name))) return &w;
  }
  throw_error(dir, ": no model.safetensors in the model folder (nor model.safetensors.index.json, ",
              "pytorch_model.bin or pytorch_model.bin.index.json)");
}

Checkpoint open_weights(const std::string& dir, const WeightsFile& w) {
  const std::string path = join_path(dir, w.name);
  return w.sharded ? Checkpoint::open_sharded(path, w.format) : Checkpoint::open(path, w.format);
}

}  // namespace

std::string model_weights_path(const std::string& dir) {
  return join_path(dir, find_weights(dir)->name);
}

Checkpoint open_model_weights(const std::string& dir) {
  return open_weights(dir, *find_weights(dir));
}

std::optional<int> checkpoint_head_outputs(const std::string& dir, const ModelConfig& config) {
  const Checkpoint checkpoint = open_model_weights(dir);
  const CheckpointTensor* t = checkpoint.find(model_head(config).output_weight(config));
  if (t == nullptr || t->shape.rank() != 2) return std::nullopt;
  return static_cast<int>(t->shape.dims[0]);
}

namespace {

// The first element of a tensor that is NaN or infinite: an error naming the tensor (a
// diverged or corrupt checkpoint would otherwise give NaN logits labelled as a class).
void check_finite(const float* values, std::int64_t n, const std::string& tensor,
                  const std::string& file) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) {
      throw_error(file, ": tensor '", tensor, "' holds ", values[i], " at element ", i,
                  "; a model's weights must be finite numbers");
    }
  }
}

// transformers' warning for weights a model starts without (modeling_utils.py).
void say_new_head(const CheckpointMatch& match, const ModelConfig& config,
                  const ParamLayout& layout, const std::string& dir) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < match.names.size(); ++i) {
    const ParamEntry& e = layout.entries()[i];
    // (Dense tensors are read from their modules' files, not the checkpoint.)
    if (match.names[i].empty() && !is_dense_role(e.role)) names.push_back("'" + e.name + "'");
  }
  if (names.empty()) return;
  const std::string model_class = config.family->class_for(config.head);
  std::string text =
      cat("Some weights of ", model_class, " were not initialized from the model checkpoint at ",
          dir, " and are newly initialized");
  if (!match.mismatched.empty()) {
    text += cat(" because the shapes did not match: ", join(match.mismatched, 4), "; newly ",
                "initialized");
  }
  text += cat(": [", join(names, 8),
              "]. You should probably TRAIN this model on a down-stream task to be able to use it "
              "for predictions and inference.");
  if (log_config().rank == 0) log_warn(text);
}

// Refuses (LoadOptions::require_head) a model whose sequence-classification head would start
// untrained: config.json's architectures names another class, or the weights lack the head.
// One line naming the folder or the weights file, the head's tensors and what the checkpoint is.
void require_trained_head(const CheckpointMatch& match, const ModelState& state,
                          const std::string& dir, const std::string& weights_path) {
  const ModelConfig& c = state.config;
  std::vector<std::string> fresh;
  for (std::size_t i = 0; i < match.names.size(); ++i) {
    const ParamEntry& e = state.layout.entries()[i];
    if (match.names[i].empty() && !is_dense_role(e.role)) fresh.push_back("'" + e.name + "'");
  }
  const std::string model_class = c.family->class_for(c.head);
  const std::string kind = cat("a ", head_kind_noun(c.head));
  const std::string tensors =
      cat(fresh.size(), " tensor", fresh.size() == 1 ? "" : "s", ": ", join(fresh, 4));
  const char* advice = "; fine-tune it with `bertfit train` first (which starts a new head)";
  if (!c.other_architecture.empty()) {
    const ArchitectureClass a =
        classify_architecture(class_prefix(*c.family), c.other_architecture);
    const std::string labels = c.other_architecture.ends_with("ForTokenClassification")
                                   ? cat(", ", c.num_labels, " labels")
                                   : "";
    throw_error(dir, ": config.json's architectures says ", c.other_architecture, ", ", a.what,
                labels, ", not ", kind, " (", model_class, "): that head would start ",
                "untrained (", tensors, ")", advice);
  }
  if (fresh.empty()) return;
  const bool named = state.hf_config.is_object() && state.hf_config.contains("architectures") &&
                     !state.hf_config["architectures"].is_null() &&
                     !state.hf_config["architectures"].empty();
  throw_error(weights_path, ": the ", model_class, " head is not in the checkpoint (", tensors, ")",
              named ? cat(" though config.json's architectures says ", model_class)
                    : cat("; config.json names no architectures and the tensors are a model "
                          "without a ",
                          head_kind_name(c.head), " head"),
              advice);
}

// The head of a checkpoint whose config.json names no architectures (saved by hand, or by a
// tool that does not write them): the one whose every tensor the weights hold when the other's
// are not all there (a BertForTokenClassification has no pooler, a RoBERTa token head a bare
// `classifier` rather than `classifier.dense` and `classifier.out_proj`); else the config's.
HeadKind head_from_tensors(const Checkpoint& checkpoint, const ModelConfig& config) {
  std::vector<HeadKind> complete;
  for (HeadKind kind : {HeadKind::kSequenceClassification, HeadKind::kTokenClassification}) {
    ModelConfig c = config;
    c.head = kind;
    const ParamLayout layout(c);
    try {
      const CheckpointMatch match = match_checkpoint(checkpoint, layout, c);
      if (std::none_of(match.names.begin(), match.names.end(),
                       [](const std::string& n) { return n.empty(); })) {
        complete.push_back(kind);
      }
    } catch (const Error&) {
      // Not this head (a tensor of another shape): the other's match decides.
    }
  }
  return complete.size() == 1 ? complete[0] : config.head;
}

}  // namespace

ModelState load_model(const std::string& dir, const LoadOptions& options) {
  const std::string config_path = join_path(dir, "config.json");
  if (is_directory(dir) && !path_exists(config_path)) {
    throw_error(dir, ": no config.json in the model folder");
  }
  const WeightsFile& weights = *find_weights(dir);  // the folder's errors before config.json's
  json hf = read_json_file(config_path);
  const Checkpoint checkpoint = open_weights(dir, weights);
  ModelConfig config = options.config ? *options.config : parse_model_config_json(hf, config_path);
  std::optional<SentenceTransformerSpec> st = read_sentence_transformer(dir);
  const bool st_model = st && !options.config;  // the folder's modules decide the model
  if (st_model) {
    use_sentence_transformer(*st, dir, config);
  } else if (!options.config && architecture_of(hf, *config.family, config_path).empty()) {
    config.head = head_from_tensors(checkpoint, config);
  }
  if (options.pooling) {
    if (!st) {
      st.emplace();
      st->word_embedding_dimension = config.hidden;
      st->max_seq_length = config.max_tokens();
    }
    st->pooling = {*options.pooling};
    if (!st->dense.empty() && st->dense.front().in_features != config.hidden) {
      throw_error("--pooling ", pooling_name(*options.pooling), ": ", dir, "'s Dense module '",
                  st->dense.front().path, "' takes ", st->dense.front().in_features,
                  " values, but that pooling gives ", config.hidden);
    }
    config.head = HeadKind::kEmbedding;
    config.pooling = st->pooling;
    config.normalize = st->normalize;
  }
  ModelState state(config);
  // The modules describe the model only when it runs as the embedder they make (not a
  // classifier trained from a sentence-transformers folder).
  if (!config.pooling.empty()) state.sentence_transformer = std::move(st);
  // The folder's own architectures decide whose head its weights hold, whichever config runs.
  state.config.other_architecture =
      other_architecture(hf, *state.config.family, state.config.head, config_path);
  // sentence-transformers' Transformer module loads the base model (AutoModel) whatever class
  // config.json names (a BertForMaskedLM it was trained from): the modules decide.
  if (st_model || options.pooling) state.config.other_architecture.clear();
  state.hf_config = std::move(hf);
  const std::string& weights_path = checkpoint.path();
  CheckpointMatch match =
      match_checkpoint(checkpoint, state.layout, state.config, options.reinit_mismatched_head);
  if (options.require_head) require_trained_head(match, state, dir, weights_path);
  const auto& entries = state.layout.entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!match.names[i].empty()) {
      const CheckpointTensor* t = checkpoint.find(match.names[i]);
      CHECK(t != nullptr, "matched tensor ", match.names[i], " is not in ", weights_path);
      read_f32(*t, state.params.data() + entries[i].offset);
      // Copied: the mapping's pages need not stay resident beside the parameters (loading
      // would otherwise peak at twice the weights).
      drop_resident_pages(t->bytes);
      check_finite(state.params.data() + entries[i].offset, entries[i].size, match.names[i],
                   t->file);
    } else {
      init_param_tensor(state.layout, state.config, i, options.head_init_seed, state.params.data());
    }
  }
  if (!state.config.dense.empty()) {
    CHECK(state.sentence_transformer &&
              state.sentence_transformer->dense.size() == state.config.dense.size(),
          "Dense modules without their files");
    load_dense_tensors(*state.sentence_transformer, state.layout, state.params.data());
  }
  say_new_head(match, state.config, state.layout, dir);
  if (state.sentence_transformer) {
    // Kept as named and as read (ModelState::kept), for save_model.
    state.base_model_names = match.base_model_names;
    const std::set<std::string> used(match.names.begin(), match.names.end());
    for (const auto& t : checkpoint.tensors()) {
      if (used.count(t.name)) continue;
      state.kept.push_back(
          {t.name, t.dtype, t.shape, std::vector<std::byte>(t.bytes.begin(), t.bytes.end())});
    }
  }
  if (st_model) {
    // sentence-transformers' Transformer module loads the base model and never reads the
    // pooler (nor a pre-training head the file may still hold): not worth a warning.
    match.ignored.clear();
  }
  if (!match.ignored.empty()) {
    const std::string& other = state.config.other_architecture;
    log_warn(weights_path, ": ignoring ", match.ignored.size(), " tensor(s) that a ",
             state.config.model_type(), " ", head_kind_noun(state.config.head), " does not use",
             other.empty() ? "" : cat(" (config.json's architectures says ", other, ")"), ": ",
             join(match.ignored, 5));
  }
  return state;
}

std::int64_t count_vocab_lines(const std::string& text) {
  std::int64_t n = std::count(text.begin(), text.end(), '\n');
  if (!text.empty() && text.back() != '\n') ++n;
  return n;
}

namespace {

// dir/model.safetensors: every parameter in F32 under its HF name, in layout order.
// The Dense modules' tensors go to their own folders (write_dense_weights).
void write_weights(const std::string& dir, const ModelState& state) {
  std::vector<TensorToWrite> tensors;
  const std::string prefix = state.config.family->base_prefix;
  for (const ParamEntry& e : state.layout.entries()) {
    if (is_dense_role(e.role)) continue;
    // A folder whose names had no prefix is written without it (ModelState::base_model_names).
    const bool strip = state.base_model_names && starts_with(e.name, prefix);
    tensors.push_back({strip ? e.name.substr(prefix.size()) : e.name, SafetensorsDType::kF32,
                       e.shape, state.params.data() + e.offset});
  }
  for (const ModelState::KeptTensor& t : state.kept) {
    tensors.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
  }
  write_safetensors(join_path(dir, "model.safetensors"), tensors);
}

// The sentence-transformers module files and the Dense modules' weights.
void write_modules(const std::string& dir, const ModelState& state) {
  CHECK(state.config.dense.empty() ||
            (state.sentence_transformer &&
             state.sentence_transformer->dense.size() == state.config.dense.size()),
        "Dense tensors without their modules");
  if (!state.sentence_transformer) return;
  write_dense_weights(dir, state.config, state.layout, state.params.data());
  write_sentence_transformer(dir, *state.sentence_transformer);
}

// tokenizer_config.json as BertTokenizer / DistilBertTokenizer read it; normalisation settings
// come from the source folder's tokenizer_config.json when there is one.
std::string tokenizer_config(const ModelConfig& config, const std::string& source_dir) {
  json j = {{"clean_up_tokenization_spaces", true},
            {"cls_token", "[CLS]"},
            {"do_basic_tokenize", true},
            {"do_lower_case", true},
            {"mask_token", "[MASK]"},
            {"model_max_length", config.max_tokens()},
            {"never_split", nullptr},
            {"pad_token", "[PAD]"},
            {"sep_token", "[SEP]"},
            {"strip_accents", nullptr},
            {"tokenize_chinese_chars", true},
            {"tokenizer_class", config.family->tokenizer_class},
            {"unk_token", "[UNK]"}};
  if (!source_dir.empty()) {
    std::string path = join_path(source_dir, "tokenizer_config.json");
    if (path_exists(path)) {
      json src = read_json_file(path);
      for (const char* key : {"do_lower_case", "strip_accents", "tokenize_chinese_chars",
                              "do_basic_tokenize", "never_split"}) {
        if (src.is_object() && src.contains(key)) j[key] = src[key];
      }
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace

namespace {

// The source folder's tokenizer files (name, contents), read before anything is written. Error
// when the folder lacks the ones the family's tokenizer needs.
std::vector<std::pair<std::string, std::string>> own_tokenizer_files(const ModelConfig& config,
                                                                     const std::string& source) {
  auto has = [&](const char* name) { return path_exists(join_path(source, name)); };
  // The kind's file sets (tokenizer/kind.h): "vocab.json and merges.txt (or tokenizer.json)".
  std::string needed;
  bool complete = false;
  for (const TokenizerFileSet& set : tokenizer_file_sets(config.family->tokenizer)) {
    std::string names;
    bool all = true;
    for (const char* name : set) {
      if (name == nullptr) continue;
      names += names.empty() ? name : cat(" and ", name);
      all = all && has(name);
    }
    needed += needed.empty() ? names : cat(" (or ", names, ")");
    complete = complete || all;
  }
  if (!is_directory(source) || !complete) {
    throw_error(source, ": a ", config.model_type(), " model carries its tokenizer's files (",
                needed, "); give a folder that holds them");
  }
  std::vector<std::pair<std::string, std::string>> files;
  for (const char* name : kTokenizerFileNames) {
    if (has(name)) files.emplace_back(name, read_file(join_path(source, name)));
  }
  return files;
}

}  // namespace

void save_model(const std::string& dir, const ModelState& state, const std::string& vocab_source) {
  CHECK(state.params.size() == static_cast<std::size_t>(state.layout.total()), "params ",
        state.params.size(), " vs layout ", state.layout.total());
  if (path_exists(dir) && !is_directory(dir)) {
    throw_error(dir, ": the output exists and is not a folder");
  }
  if (state.config.family->tokenizer != TokenizerKind::kWordPiece) {
    const auto files = own_tokenizer_files(state.config, vocab_source);
    make_directories(dir);
    write_file_atomic(join_path(dir, "config.json"),
                      model_config_to_json(state.config, state.hf_config));
    write_weights(dir, state);
    for (const auto& [name, text] : files) write_file_atomic(join_path(dir, name), text);
    write_modules(dir, state);
    return;
  }
  // Read the vocabulary before writing anything, so a bad source leaves no partial model.
  const bool source_is_dir = is_directory(vocab_source);
  const std::string vocab_path =
      source_is_dir ? join_path(vocab_source, "vocab.txt") : vocab_source;
  if (!path_exists(vocab_path)) throw_error(vocab_path, ": vocabulary file not found");
  const std::string vocab = read_file(vocab_path);
  const std::int64_t tokens = count_vocab_lines(vocab);
  if (tokens > state.config.vocab_size) {
    throw_error(vocab_path, ": has ", tokens, " tokens but the model's vocab_size is ",
                state.config.vocab_size);
  }
  const std::string source_dir = source_is_dir ? vocab_source : "";
  const std::string tokenizer = tokenizer_config(state.config, source_dir);
  std::string special_tokens = json({{"cls_token", "[CLS]"},
                                     {"mask_token", "[MASK]"},
                                     {"pad_token", "[PAD]"},
                                     {"sep_token", "[SEP]"},
                                     {"unk_token", "[UNK]"}})
                                   .dump(2) +
                               "\n";
  if (source_is_dir && path_exists(join_path(vocab_source, "special_tokens_map.json"))) {
    special_tokens = read_file(join_path(vocab_source, "special_tokens_map.json"));
  }

  make_directories(dir);
  write_file_atomic(join_path(dir, "config.json"),
                    model_config_to_json(state.config, state.hf_config));
  write_weights(dir, state);
  write_file_atomic(join_path(dir, "vocab.txt"), vocab);
  write_file_atomic(join_path(dir, "tokenizer_config.json"), tokenizer);
  write_file_atomic(join_path(dir, "special_tokens_map.json"), special_tokens);
  write_modules(dir, state);
}

}  // namespace bertfit
