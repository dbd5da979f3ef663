// `bertfit report RUN_DIR`: the curves of a training run (the --output of `bertfit train`, while
// it runs or after) as one self-contained HTML page that a browser opens offline: loss and
// learning rate per step, every evaluation metric, throughput, the best step marked, the result
// and the run's settings (src/report).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "base/error.h"
#include "base/file.h"
#include "report/report.h"

namespace bertfit::cli {

void add_report_command(CLI::App& app) {
  struct ReportOptions {
    std::string run_dir, output;
  };
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write a training run's curves (loss and learning rate per step, each evaluation metric, "
      "throughput, the best step marked) with its result and settings as one self-contained "
      "HTML page (inline SVG, no script, no network); prints its path.");
  add_flags(*cmd,
            {{"run_dir", "The run's folder: the --output of `bertfit train`", &o->run_dir},
             {"--output", "The HTML file to write (default: RUN_DIR/report.html)", &o->output}});
  cmd->get_option("run_dir")->required();
  cmd->callback([o] {
    const report::RunRecords run = report::read_run(o->run_dir);
    const std::string out = o->output.empty() ? join_path(o->run_dir, "report.html") : o->output;
    const std::string title =
        "bertfit run " + std::filesystem::path(o->run_dir).lexically_normal().string();
    write_file_atomic(out, report::render_report(run, title));
    std::printf("%s\n", out.c_str());
  });
}

}  // namespace bertfit::cli
