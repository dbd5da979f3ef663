// `bertfit inspect DIR`: what a model folder holds (config summary, the safetensors tensor
// table, parameter count) and whether its tensors fit its config, checked as load_model does.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "base/error.h"
#include "base/file.h"
#include "io/safetensors.h"
#include "model/config.h"
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
  std::printf("arch:          %s (%s)\n", arch_name(c.arch),
              c.arch == Arch::kBert ? "BertForSequenceClassification"
                                    : "DistilBertForSequenceClassification");
  std::printf(
      "sizes:         vocab %d, hidden %d, layers %d, heads %d (head dim %d), "
      "intermediate %d, max positions %d",
      c.vocab_size, c.hidden, c.layers, c.heads, c.head_dim(), c.intermediate, c.max_positions);
  if (c.type_vocab_size > 0) std::printf(", token types %d", c.type_vocab_size);
  std::printf("\nactivation:    %s, layer_norm_eps %g\n", activation_name(c.activation),
              c.layer_norm_eps);
  std::printf("labels:        %d (%s)%s%s\n", c.num_labels, join(c.id2label, 10).c_str(),
              c.is_regression() ? ", regression" : ", classification",
              c.problem_type.empty() ? "" : (", problem_type " + c.problem_type).c_str());
  std::printf("dropout:       hidden %g, attention %g, classifier %g\n", c.hidden_dropout,
              c.attention_dropout, c.classifier_dropout);
  std::printf("init:          initializer_range %g, pad_token_id %d\n", c.initializer_range,
              c.pad_token_id);
}

void print_tensors(const SafetensorsFile& file) {
  std::string meta;
  for (const auto& [k, v] : file.metadata()) meta += (meta.empty() ? "" : ", ") + k + "=" + v;
  std::printf("\n%s: %zu tensors%s\n", file.path().c_str(), file.tensors().size(),
              meta.empty() ? "" : (" (metadata: " + meta + ")").c_str());
  std::size_t width = 4;
  for (const auto& t : file.tensors()) width = std::max(width, t.name.size());
  std::printf("  %-*s  %-5s  %s\n", static_cast<int>(width), "name", "dtype", "shape");
  std::int64_t floats = 0;
  for (const auto& t : file.tensors()) {
    std::printf("  %-*s  %-5s  %s\n", static_cast<int>(width), t.name.c_str(),
                safetensors_dtype_name(t.dtype), t.shape.str().c_str());
    if (is_floating(t.dtype)) floats += t.shape.numel();
  }
  std::printf("floating-point values in the file: %lld\n", static_cast<long long>(floats));
}

void run_inspect(const std::string& dir) {
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
  std::optional<SafetensorsFile> file;
  try {
    file.emplace(SafetensorsFile::open(model_weights_path(dir)));
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
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Describe a model folder: the config (architecture, sizes, activation, labels, dropouts), "
      "the tensors of model.safetensors (name, dtype, shape), the parameter count, and whether "
      "the tensors fit the config (exits non-zero with the problem if not).");
  add_flags(*cmd, {{"dir", "Model folder (config.json + model.safetensors)", dir.get()}});
  cmd->get_option("dir")->required();
  cmd->callback([dir] { run_inspect(*dir); });
}

}  // namespace bertfit::cli
