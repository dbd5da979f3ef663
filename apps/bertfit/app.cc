// The bertfit app (see app.h).
#include "apps/bertfit/app.h"

#include <algorithm>
#include <set>
#include <string>

#include "apps/bertfit/commands.h"
#include "base/nearest.h"

namespace bertfit::cli {
namespace {

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

}  // namespace

std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return "";
  const std::vector<std::string> names = command_names(app);
  if (std::find(names.begin(), names.end(), word) != names.end()) return "";
  const std::string near = nearest(word, names);
  if (!near.empty()) return "unknown command '" + word + "'; did you mean '" + near + "'?";
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return "unknown command '" + word + "'; the commands are " + list;
}

std::string unused_arguments_message(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* cmd = &app;
  for (const CLI::App* sub : app.get_subcommands()) cmd = sub;  // the command that ran
  const std::vector<std::string> left = app.remaining(true);
  const std::set<std::string> unused(left.begin(), left.end());
  std::string flag, word;
  for (const std::string& a : args) {
    const std::string name = a.substr(0, a.find('='));  // "--flag=value"
    if (!unused.count(a) && !unused.count(name)) continue;
    if (a.size() > 1 && a[0] == '-') {
      flag = name;
      break;
    }
    if (word.empty()) word = a;
  }
  const std::string where = "'bertfit" + (cmd == &app ? "" : " " + cmd->get_name()) + "'";
  if (flag.empty()) {
    return "unexpected argument '" + (word.empty() ? left.front() : word) + "' for " + where;
  }
  std::vector<std::string> flags;
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  }
  const std::string near = nearest(flag, flags);
  return "unknown flag '" + flag + "' for " + where +
         (near.empty() ? "" : "; did you mean '" + near + "'?");
}

void build_app(CLI::App& app) {
  app.description(
      "bertfit: fine-tune BERT-family text encoders (DistilBERT, BERT, RoBERTa, XLM-R,\n"
      "CamemBERT, ELECTRA, DeBERTa-v2/v3, ModernBERT) on CPUs and run them. Models are Hugging "
      "Face\n"
      "folders (config.json; model.safetensors, pytorch_model.bin or either sharded; the\n"
      "tokenizer's vocab.txt, vocab.json + merges.txt, tokenizer.json, sentencepiece.bpe.model\n"
      "or spm.model) or Hub repository ids (org/name), downloaded into the Hugging Face cache\n"
      "(HF_HOME, HF_HUB_CACHE; token HF_TOKEN; HF_HUB_OFFLINE=1: the cache only).");
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "bertfit " BERTFIT_VERSION);
  // A command-line error is one line, as every other error bertfit reports.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "bertfit: error: " + std::string(e.what()) + "; run with --help for more information\n";
  });
  // The commands, in the order --help lists them: the main job first.
  for (auto add : {add_train_command, add_eval_command, add_predict_command, add_embed_command,
                   add_serve_command, add_tokenize_command, add_init_command, add_download_command,
                   add_convert_command, add_inspect_command, add_forward_command, add_bench_command,
                   add_tune_command, add_report_command}) {
    add(app);
  }
}

}  // namespace bertfit::cli
