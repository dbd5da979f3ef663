// The bertfit subcommands. Each cmd_<name>.cc adds its subcommand to the app with its flags
// (the shared groups of flags/groups.h and its own, all as flag tables) and its action;
// app.cc lists them in the order --help shows them.
#pragma once

namespace CLI {
class App;
}

namespace bertfit::cli {

void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_init_command(CLI::App& app);
void add_download_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_forward_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_report_command(CLI::App& app);

}  // namespace bertfit::cli
