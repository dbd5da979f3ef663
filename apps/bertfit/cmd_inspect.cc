// `bertfit inspect MODEL`: what a model folder (or a Hub repository id's snapshot folder) holds:
// config summary, the tensor table of its weights in whichever form they are (safetensors,
// PyTorch, either sharded), parameter count, and whether the tensors fit the config, checked as
// load_model does.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/file.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/family.h"
#include "model/model_io.h"

namespace bertfit::cli {
namespace {

std::string join(const std::vector<std::string>& items, std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < max_items; ++i) {
    out += (i ? ", " : "") + items[i];
  }
  if (items.size() > max_items) out += cat(", ... (", items.size() - max_items, " more)");
  return out;
}

void print_config(const ModelConfig& c) {
  std::printf("arch:          %s (%s)\n", c.model_type(), c.family->class_for(c.head).c_str());
  std::printf("head:          %s\n", head_kind_name(c.head));
  if (!c.other_architecture.empty()) {
    std::printf(
        "checkpoint:    %s per config.json's architectures: no %s head (eval, predict, forward "
        "and serve refuse it; train starts a new one)\n",
        c.other_architecture.c_str(), head_kind_name(c.head));
  }
  std::printf(
      "sizes:         vocab %d, hidden %d, layers %d, heads %d (head dim %d), "
      "intermediate %d, max positions %d",
      c.vocab_size, c.hidden, c.layers, c.heads, c.head_dim(), c.intermediate, c.max_positions);
  if (c.type_vocab_size > 0) std::printf(", token types %d", c.type_vocab_size);
  std::printf("\nactivation:    %s, layer_norm_eps %g\n", activation_name(c.activation),
              c.layer_norm_eps);
  std::printf("positions:     %s", c.absolute_positions ? "absolute (learned)" : "no absolute");
  if (c.relative.enabled) {
    const RelativeAttentionConfig& r = c.relative;
    std::printf("; relative (%s%s%s, %d embeddings, ", r.c2p ? "c2p" : "",
                r.c2p && r.p2c ? "+" : "", r.p2c ? "p2c" : "", 2 * r.span(c.max_positions));
    if (r.buckets > 0) {
      std::printf("%d log buckets up to %d", r.buckets, r.max_distance(c.max_positions));
    } else {
      std::printf("not bucketed");
    }
    std::printf("%s)", r.layer_norm ? ", normalized" : "");
  }
  std::printf("\n");
  std::printf("labels:        %d (%s)%s%s\n", c.num_labels, join(c.id2label, 10).c_str(),
              c.is_regression() ? ", regression" : ", classification",
              c.problem_type.empty() ? "" : (", problem_type " + c.problem_type).c_str());
  std::printf("dropout:       hidden %g, attention %g, classifier %g\n", c.hidden_dropout,
              c.attention_dropout, c.classifier_dropout);
  std::printf("init:          initializer_range %g, pad_token_id %d\n", c.initializer_range,
              c.pad_token_id);
}

// A safetensors file's metadata ("format=pt"), or "" for any other file.
std::string safetensors_metadata(const std::string& path) {
  if (!path.ends_with(".safetensors")) return "";
  const SafetensorsFile file = SafetensorsFile::open(path);
  std::string meta;
  for (const auto& [k, v] : file.metadata()) {
    meta += (meta.empty() ? "" : ", ") + k + "=" + v;
  }
  return meta;
}

// The tensor table; for a sharded checkpoint its shards first and a column naming each tensor's.
void print_tensors(const Checkpoint& checkpoint) {
  const auto& tensors = checkpoint.tensors();
  std::vector<std::string> files;  // shards in order; a shard's tensors are adjacent
  for (const auto& t : tensors) {
    if (files.empty() || files.back() != t.file) files.push_back(t.file);
  }
  const bool sharded = checkpoint.path().ends_with(".index.json");
  const std::string meta = sharded ? "" : safetensors_metadata(checkpoint.path());
  std::printf("\n%s: %zu tensors%s\n", checkpoint.path().c_str(), tensors.size(),
              meta.empty() ? "" : (" (metadata: " + meta + ")").c_str());
  if (sharded) {
    std::printf("shards:        %zu\n", files.size());
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::printf("  %zu  %s\n", i + 1, files[i].c_str());
    }
  }
  std::size_t width = 4;
  for (const auto& t : tensors) width = std::max(width, t.name.size());
  // The shape column is padded only when the shard column follows it.
  const int shape_width = sharded ? 16 : 0;
  std::printf("  %-*s  %-5s  %-*s%s\n", static_cast<int>(width), "name", "dtype", shape_width,
              "shape", sharded ? "  shard" : "");
  std::int64_t floats = 0;
  for (const auto& t : tensors) {
    std::string shard;
    if (sharded) {
      shard = cat("  ", std::find(files.begin(), files.end(), t.file) - files.begin() + 1);
    }
    std::printf("  %-*s  %-5s  %-*s%s\n", static_cast<int>(width), t.name.c_str(),
                safetensors_dtype_name(t.dtype), shape_width, t.shape.str().c_str(), shard.c_str());
    if (is_floating(t.dtype)) floats += t.shape.numel();
  }
  std::printf("floating-point values in the checkpoint: %lld\n", static_cast<long long>(floats));
}

void run_inspect(const std::string& model, const std::string& revision) {
  const std::string dir = resolve_model_flag(model, revision, "model");
  if (dir != model)
    std::printf("model:         %s (revision %s)\n", model.c_str(), revision.c_str());
  std::printf("model folder:  %s\n", dir.c_str());
  std::optional<ModelConfig> config;
  std::string first_error;
  try {
    const std::string config_path = join_path(dir, "config.json");
    if (is_directory(dir) && !path_exists(config_path)) {
      throw_error(dir, ": no config.json in the model folder");
    }
    config = load_model_config(config_path);
    print_config(*config);
  } catch (const Error& e) {
    first_error = e.what();
    std::printf("config:        %s\n", e.what());
  }
  std::optional<Checkpoint> file;
  try {
    file.emplace(open_model_weights(dir));
    print_tensors(*file);
  } catch (const Error& e) {
    if (first_error.empty()) first_error = e.what();
    std::printf("\nweights:       %s\n", e.what());
  }
  if (config && file) {
    ParamLayout layout(*config);
    std::printf("parameters:    %lld (from config.json)\n", static_cast<long long>(layout.total()));
    try {
      CheckpointMatch m = match_checkpoint(*file, layout, *config);
      std::printf("check:         the tensors fit the config%s\n",
                  m.base_model_names ? " (base-model names, without the model prefix)" : "");
      if (!m.initialised.empty()) {
        std::printf("               not in the checkpoint, initialised on load: %s\n",
                    join(m.initialised, 8).c_str());
      }
      if (!m.ignored.empty()) {
        std::printf("               unused by the classifier, ignored on load: %s\n",
                    join(m.ignored, 8).c_str());
      }
    } catch (const Error& e) {
      first_error = e.what();
      std::printf("check:         the tensors do not fit the config: %s\n", e.what());
    }
  }
  std::fflush(stdout);
  if (!first_error.empty()) throw Error(first_error);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct InspectOptions {
    std::string model, revision = "main";
  };
  auto o = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Describe a model (a folder or a Hub repository id): the config (architecture, sizes, "
      "activation, labels, dropouts), the tensors of its weights in any checkpoint form "
      "(model.safetensors, pytorch_model.bin, or either sharded: name, dtype, shape), the "
      "parameter count, and whether the tensors fit the config (exits non-zero with the problem "
      "if not).");
  add_flags(*cmd, model_argument_flags(o->model, o->revision));
  cmd->get_option("model")->required();
  cmd->callback([o] { run_inspect(o->model, o->revision); });
}

}  // namespace bertfit::cli
