// The bertfit app (see app.h).
#include "apps/bertfit/app.h"

#include <string>

#include "apps/bertfit/commands.h"

namespace bertfit::cli {

void build_app(CLI::App& app) {
  app.description(
      "bertfit: fine-tune BERT-family text encoders (DistilBERT, BERT) on CPUs and run them.\n"
      "Models are Hugging Face folders (config.json; model.safetensors, pytorch_model.bin or\n"
      "either sharded; vocab.txt) or Hub repository ids (org/name), downloaded into the Hugging\n"
      "Face cache (HF_HOME, HF_HUB_CACHE; token HF_TOKEN; HF_HUB_OFFLINE=1: the cache only).");
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "bertfit " BERTFIT_VERSION);
  // A command-line error is one line, as every other error bertfit reports.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "bertfit: error: " + std::string(e.what()) + "; run with --help for more information\n";
  });
  // The commands, in the order --help lists them: the main job first.
  for (auto add :
       {add_train_command, add_eval_command, add_predict_command, add_serve_command,
        add_tokenize_command, add_init_command, add_download_command, add_convert_command,
        add_inspect_command, add_forward_command, add_bench_command, add_report_command}) {
    add(app);
  }
}

}  // namespace bertfit::cli
