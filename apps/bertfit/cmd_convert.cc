// `bertfit convert MODEL --output DIR`: a model whose weights are in any form transformers saves
// (model.safetensors, pytorch_model.bin, either sharded behind its index; fp16, bf16 or fp32)
// rewritten as the folder bertfit itself writes: config.json, model.safetensors (fp32, HF names),
// the tokenizer's files. What is written is what load_model reads: a missing head is
// initialised as from_pretrained does, and tensors the classifier does not use are left out
// (both said on stderr). The output follows train's rules (train/output_dir.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "flags/groups.h"
#include "model/model_io.h"
#include "train/output_dir.h"

namespace bertfit::cli {
namespace {

struct ConvertOptions {
  std::string model, revision = "main";
  std::string output;
  bool overwrite = false;
};

void run_convert(const ConvertOptions& o) {
  const std::string folder = resolve_model_flag(o.model, o.revision, "model");
  OutputDir out(o.output, o.overwrite, folder, /*resume_from=*/"", /*resumable=*/false);
  const std::string weights = model_weights_path(folder);
  const ModelState state = load_model(folder);
  out.create();
  save_model(out.path(), state, folder);
  out.commit();
  std::printf("converted %s: %lld parameters -> %s/model.safetensors (fp32)\n", weights.c_str(),
              static_cast<long long>(state.layout.total()), o.output.c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Rewrite a model whose weights are in any form transformers saves (model.safetensors, "
      "pytorch_model.bin, or either sharded behind its index; fp32, fp16 or bf16) as a folder "
      "of config.json, model.safetensors (fp32, Hugging Face names) and the tokenizer's "
      "files: what bertfit loads from it (a missing classification head initialised, tensors "
      "the classifier does not use left out).");
  add_flags(*cmd, model_argument_flags(o->model, o->revision));
  add_flags(*cmd, {{"--output", "Folder to write the converted model to (created if needed)",
                    &o->output}});
  add_flags(*cmd, overwrite_flags(o->overwrite));
  cmd->get_option("model")->required();
  cmd->get_option("--output")->required();
  cmd->callback([o] { run_convert(*o); });
}

}  // namespace bertfit::cli
