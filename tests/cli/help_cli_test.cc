// `bertfit --help` and `bertfit <command> --help`, checked against the flag tables: the test
// builds the same CLI::App the binary builds (apps/bertfit/app.h), walks every command and every
// option it declares, and requires the binary's help to list each one with its default where one
// is captured, that default printed once (not repeated in the help text), and a flag shared by
// several commands to read the same everywhere (one declaration).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "apps/bertfit/app.h"
#include "cli_util.h"

namespace bertfit::testing {
namespace {

// Every command of the app, in declaration order.
std::vector<CLI::App*> all_commands(CLI::App& app) {
  return app.get_subcommands([](CLI::App*) { return true; });
}

// The line of `help` that describes `name`: its first word, split at commas, holds the name
// ("  -h,--help  Print ...", "  --lr FLOAT=2e-05  Peak ..."); empty if there is none.
std::string help_line(const std::string& help, const std::string& name) {
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    const auto begin = line.find_first_not_of(' ');
    if (begin == std::string::npos) continue;
    const std::string first = line.substr(begin, line.find(' ', begin) - begin);
    std::istringstream names(first);
    for (std::string n; std::getline(names, n, ',');) {
      if (n == name) return line;
    }
  }
  return "";
}

TEST(HelpCli, HelpListsTheCommandsInTheirOrder) {
  RunResult r = run_bertfit("--help");
  ASSERT_EQ(r.exit_code, 0);
  std::size_t at = 0;
  for (const char* cmd : {"train", "eval", "predict", "embed", "serve", "tokenize", "init",
                          "download", "convert", "inspect", "forward", "bench", "tune"}) {
    const std::size_t pos = r.out.find(std::string("\n  ") + cmd + " ", at);
    ASSERT_NE(pos, std::string::npos) << cmd << " missing or out of order:\n" << r.out;
    at = pos + 1;
  }
}

TEST(HelpCli, EveryCommandListsEveryFlagWithItsDefaultOnce) {
  CLI::App app;
  cli::build_app(app);
  const std::vector<CLI::App*> commands = all_commands(app);
  ASSERT_EQ(commands.size(), 14u);
  for (const CLI::App* cmd : commands) {
    const std::string name = cmd->get_name();
    RunResult r = run_bertfit(name + " --help");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const std::vector<const CLI::Option*> options = cmd->get_options();
    EXPECT_GT(options.size(), 1u) << name;  // --help and at least one of its own
    for (const CLI::Option* opt : options) {
      const std::string flag = opt->get_name();
      const std::string line = help_line(r.out, flag);
      ASSERT_FALSE(line.empty()) << name << " --help does not list " << flag << ":\n" << r.out;
      const std::string& def = opt->get_default_str();
      if (def.empty()) continue;
      EXPECT_NE((line + " ").find("=" + def + " "), std::string::npos)
          << name << " " << flag << ": default " << def << " not shown in\n"
          << line;
      EXPECT_EQ(opt->get_description().find("(default"), std::string::npos)
          << name << " " << flag
          << ": the help text repeats the default: " << opt->get_description();
    }
  }
}

// Commands that declare a flag of their own because its meaning or default differs from the
// same name elsewhere: --output (train: the run's folder; init, convert: the model folder;
// predict: the predictions file), --seed (what it seeds), --input and --vocab (what the command
// accepts),
// --arch (init: none, model_type of --config; bench: distilbert), --max-seq-len (tokenize: 512,
// the largest BERT input; elsewhere the compute group's 128), --num-labels (init: a fresh
// model's labels; train: the head's outputs, 0 deciding from the data).
const std::set<std::pair<std::string, std::string>> kOwnFlags = {
    {"train", "--output"},
    {"init", "--output"},
    {"predict", "--output"},
    {"convert", "--output"},
    {"embed", "--output"},
    {"train", "--seed"},
    {"init", "--seed"},
    {"forward", "--seed"},
    {"predict", "--input"},
    {"tokenize", "--input"},
    {"init", "--vocab"},
    {"tokenize", "--vocab"},
    {"init", "--arch"},
    {"bench", "--arch"},
    {"tokenize", "--max-seq-len"},
    {"init", "--num-labels"},
    {"init", "--labels"},
    {"init", "--task"},
    {"train", "--pooling"},  // training's pooling of a new embedder (default auto: mean)
    {"init", "--config"},    // a model's config.json; elsewhere a tuned.json (flags/groups.h)
    // tune: what it tunes, its own objective and output folder, the length of its inputs and
    // serve's request texts, the sampler's seed.
    {"tune", "mode"},
    {"tune", "--objective"},
    {"tune", "--overwrite-output-dir"},
    {"tune", "--seq-len"},
    {"tune", "--input"},
    {"tune", "--output"},
    {"tune", "--seed"}};

// Flags declared once whose help has a variant for training (flags/groups.h, ComputeUse): the
// words train accepts and what they mean there differ from inference's.
const std::set<std::pair<std::string, std::string>> kTrainVariants = {{"train", "--precision"},
                                                                      {"train", "--batch-size"}};

TEST(HelpCli, ASharedFlagIsDeclaredOnce) {
  CLI::App app;
  cli::build_app(app);
  std::map<std::string, std::pair<std::string, std::string>> first;  // flag -> (command, help)
  int shared = 0;
  for (const CLI::App* cmd : all_commands(app)) {
    for (const CLI::Option* opt : cmd->get_options()) {
      const std::string flag = opt->get_name();
      if (kOwnFlags.count({cmd->get_name(), flag}) > 0) continue;
      if (kTrainVariants.count({cmd->get_name(), flag}) > 0) continue;
      const std::string text = opt->get_description() + " default=" + opt->get_default_str();
      auto [it, inserted] = first.emplace(flag, std::pair{cmd->get_name(), text});
      if (inserted) continue;
      ++shared;
      EXPECT_EQ(text, it->second.second)
          << flag << " differs between " << it->second.first << " and " << cmd->get_name();
    }
  }
  EXPECT_GT(shared, 20);  // --model, --threads, --precision, the data flags, --help, ...
}

// Each command's help says only what applies to it.
TEST(HelpCli, EachCommandsHelpSaysOnlyWhatAppliesToIt) {
  for (const char* cmd : {"eval", "predict", "embed", "serve", "bench", "forward"}) {
    RunResult r = run_bertfit(std::string(cmd) + " --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("--grad-accum"), std::string::npos) << cmd << ":\n" << r.out;
    EXPECT_EQ(r.out.find("master weights"), std::string::npos) << cmd << ":\n" << r.out;
    EXPECT_NE(help_line(r.out, "--precision").find("int8"), std::string::npos) << cmd;
  }
  RunResult r = run_bertfit("train --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(help_line(r.out, "--precision").find("int8"), std::string::npos)
      << help_line(r.out, "--precision");
  EXPECT_NE(help_line(r.out, "--batch-size").find("--grad-accum"), std::string::npos);
}

TEST(HelpCli, AnUnknownCommandIsNamedWithTheNearest) {
  RunResult r = run_bertfit("trian --model m");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "bertfit: error: unknown command 'trian'; did you mean 'train'?\n");
  r = run_bertfit("prdict");
  EXPECT_EQ(r.err, "bertfit: error: unknown command 'prdict'; did you mean 'predict'?\n");
  r = run_bertfit("frobnicate");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'; the commands are train, eval, predict"),
            std::string::npos)
      << r.err;
}

TEST(HelpCli, AnUnknownFlagIsNamedFirst) {
  RunResult r = run_bertfit("train --model m --output o --adafactor");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("bertfit: error: unknown flag '--adafactor' for 'bertfit train'", 0), 0u)
      << r.err;
  r = run_bertfit("predict --model m --input x.tsv --text-a-column t --treshold 0.3");
  EXPECT_NE(r.err.find("unknown flag '--treshold' for 'bertfit predict'; did you mean "
                       "'--threshold'? run with --help"),
            std::string::npos)
      << r.err;
  r = run_bertfit("eval --model m --task sst2 --data d --split=test --batch-sise=3");
  EXPECT_NE(r.err.find("unknown flag '--batch-sise'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bertfit::testing
