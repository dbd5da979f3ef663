// `bertfit download REPO [--revision R]`: makes sure the Hugging Face cache holds what a model
// needs (config.json, the weights in the first form the repository has, the tokenizer files;
// hub/hub.h) and prints its snapshot folder, one line on stdout, for scripts. Failures are the
// Hub library's one-line messages.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "flags/groups.h"
#include "hub/hub.h"

namespace bertfit::cli {

void add_download_command(CLI::App& app) {
  struct DownloadOptions {
    std::string repo, revision = "main";
  };
  auto o = std::make_shared<DownloadOptions>();
  CLI::App* cmd = app.add_subcommand(
      "download",
      "Download a model from the Hugging Face Hub into the Hugging Face cache (what --model "
      "org/name does before it loads) and print its snapshot folder. The cache is HF_HUB_CACHE, "
      "else HF_HOME/hub (default ~/.cache/huggingface/hub); the token HF_TOKEN, else "
      "HF_HOME/token; HF_ENDPOINT names another Hub; with HF_HUB_OFFLINE=1 only the cache is "
      "read.");
  std::string unused;
  add_flags(*cmd, {{"repo", "Hub repository id (name or org/name)", &o->repo}});
  add_flags(*cmd, select_flags(model_flags(unused, o->revision), {"--revision"}));
  cmd->get_option("repo")->required();
  cmd->callback([o] {
    HubOptions options = hub_options_from_env();
    options.revision = o->revision;
    const ModelSnapshot snapshot = download_model(o->repo, options);
    std::printf("%s\n", snapshot.folder.c_str());
  });
}

}  // namespace bertfit::cli
