// bench/tune_vs_grid.sh on a tiny configuration (below), and bench/embed_vs_ort.sh end to end on
// a tiny configuration (a 2-layer encoder of 128, one round,
// two lengths, one second of HTTP load; enough rows that each `embed` run outlasts its one-row run
// by a tenth of a second or more): it runs `bertfit embed`, `bench infer`,
// `serve`'s /embed and the ONNX Runtime peer on the same model and prints its tables. Only that
// it runs and reports every measurement it promises, each a positive finite figure, and that its
// token bookkeeping is right; the figures themselves belong to docs/PERFORMANCE.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

struct ScriptRun {
  int exit_code = -1;
  std::string out, err;
};

ScriptRun run_script(const std::string& env, const std::string& script = "embed_vs_ort.sh") {
  TempDir tmp;
  const std::string cmd = env + " BERTFIT=" + bertfit_binary() + " bash " + BERTFIT_SOURCE_DIR +
                          "/bench/" + script + " </dev/null >" + (tmp / "out") + " 2>" +
                          (tmp / "err");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_text(tmp / "out"),
          read_text(tmp / "err")};
}

// The cells of the Markdown table rows of `out` whose first cell starts with `first`.
std::vector<std::vector<std::string>> table_rows(const std::string& out, const std::string& first) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + first, 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cells_in(line.substr(1));
    for (std::string cell; std::getline(cells_in, cell, '|');) {
      cells.push_back(cell.substr(1, cell.size() - 2));
    }
    rows.push_back(cells);
  }
  return rows;
}

// Cells [from, to) hold figures: finite, and positive (a rate, a count) or, for ratios and
// times printed to two decimals that a tiny model can round to zero, at least zero.
void expect_figures(const std::vector<std::string>& row, std::size_t from, std::size_t to,
                    bool positive) {
  ASSERT_GE(row.size(), to);
  for (std::size_t i = from; i < to; ++i) {
    char* end = nullptr;
    const double v = std::strtod(row[i].c_str(), &end);
    EXPECT_TRUE(end != row[i].c_str() && std::isfinite(v) && (positive ? v > 0 : v >= 0))
        << "cell " << i << ": " << row[i];
  }
}

bool have(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Run by hand (BERTFIT_BENCH_SMOKE=1): it times real runs on a shared machine (a loaded one can
// make "whole run minus one-row run" meaningless) and the peer may install ONNX Runtime from npm
// on first use, neither of which belongs in CI's test suite.
TEST(BenchScriptCli, EmbedVsOrtRunsEveryMeasurementOnATinyModel) {
  if (std::getenv("BERTFIT_BENCH_SMOKE") == nullptr) {
    GTEST_SKIP() << "set BERTFIT_BENCH_SMOKE=1 to run the benchmark script's smoke run";
  }
  if (!have("wrk")) GTEST_SKIP() << "needs wrk (apt install wrk)";
  if (!fs::exists(shared_dir() + "/peer/run-ort-peer")) GTEST_SKIP() << "no ONNX Runtime peer";
  const ScriptRun r = run_script(
      "SIZE=tiny ROUNDS=1 BATCH=4 SEQ_LENS='8 16' ROWS=0 TOKENS=65536 CLIENTS=2 HTTP_SECONDS=1");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // One JSON line per measurement: per length, embed and forward in each precision and ORT in
  // each; per precision, embed and /embed on the real sentences.
  int measurements = 0;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("{\"round\":1,", 0) != 0) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const double v = j.contains("ms") ? j["ms"].get<double>() : j["per_s"].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v > 0) << line;
    ++measurements;
  }
  EXPECT_EQ(measurements, 2 * (2 * 2 + 2) + 2 * 2);
  // The fixed-length table: both lengths in both precisions, every figure and ratio.
  for (const std::string shape : {"4x8", "4x16"}) {
    const auto rows = table_rows(r.out, shape + " ");
    ASSERT_EQ(rows.size(), 2u) << shape << "\n" << r.out;
    EXPECT_EQ(rows[0][1], "fp32 (ORT fp32)");
    EXPECT_EQ(rows[1][1], "int8 (ORT int8)");
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), 7u);
      expect_figures(row, 2, 5, true);  // embed, forward, ORT sentences/s
      expect_figures(row, 5, 7, false);
    }
  }
  // The real sentences: all 3000 of STS-B dev, their padding, and each precision's row.
  // "Real sentences: 3000 of STS-B dev, N tokens (mean X, max M); ...: P tokens" (read without
  // std::regex, whose GCC 12 headers warn under ASan).
  const std::string head = "Real sentences: 3000 of STS-B dev, ";
  const std::size_t at = r.out.find(head);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  long real_tokens = 0, max_len = 0;
  double mean = 0;
  ASSERT_EQ(std::sscanf(line.c_str() + head.size(), "%ld tokens (mean %lf, max %ld);", &real_tokens,
                        &mean, &max_len),
            3)
      << line;
  const std::size_t last = line.rfind(": ");
  ASSERT_NE(last, std::string::npos) << line;
  const long padded = std::strtol(line.c_str() + last + 2, nullptr, 10);
  EXPECT_GE(real_tokens, 3000 * 3);  // [CLS], a word at least, [SEP]
  EXPECT_GE(padded, real_tokens);
  EXPECT_LE(padded, 3000 * max_len);
  for (const std::string p : {"fp32 (ORT fp32)", "int8 (ORT int8)"}) {
    const auto rows = table_rows(r.out, p);
    ASSERT_EQ(rows.size(), 1u) << p << "\n" << r.out;
    ASSERT_EQ(rows[0].size(), 7u);
    expect_figures(rows[0], 1, 4, true);  // embed, /embed, ORT sentences/s
    expect_figures(rows[0], 4, 7, false);
  }
  // The phases: inputs, batches, sequences and tokens a batch, then times and tokens/s.
  for (const std::string p : {"fp32 |", "int8 |"}) {
    const auto rows = table_rows(r.out, p);
    ASSERT_EQ(rows.size(), 1u) << p << "\n" << r.out;
    ASSERT_EQ(rows[0].size(), 9u);
    expect_figures(rows[0], 1, 5, true);
    expect_figures(rows[0], 5, 8, false);
    expect_figures(rows[0], 8, 9, true);
  }
}

// bench/tune_vs_grid.sh on a tiny model, a 4-combination grid per scenario, 2 seeds of 3 trials,
// one round: every table and row it promises, every figure a measured one. Which setting wins
// is not asserted (the figures belong to docs/PERFORMANCE.md).
TEST(BenchScriptCli, TuneVsGridRunsBothScenariosOnATinyModel) {
  if (std::system("/usr/bin/python3 -c 'import optuna, sklearn' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs python3-optuna and python3-sklearn";
  }
  const std::string held =
      " --fix bind=none --fix allocator=glibc --fix precision=fp32,bf16"
      " --fix wait=passive,active";
  const ScriptRun r = run_script(
      "SIZE=tiny MIN_COMBOS=4 SEEDS=2 TRIALS=3 ROUNDS=1 MEASURE_S=0.2 SEQ_INFER=16"
      " FIX_SERVE='--fix workers=auto --fix max_batch_tokens=1024 --fix max_batch_requests=0"
      " --fix threads=2" +
          held + "' FIX_INFER='--fix batch_size=8 --fix layout=1x2" + held + "'",
      "tune_vs_grid.sh");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const std::string mode : {"serve", "infer"}) {
    EXPECT_NE(r.err.find(mode + ": grid of 4 combinations"), std::string::npos) << r.err;
    const std::size_t at = r.out.find("### " + mode + ": ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string part = r.out.substr(at, r.out.find("### ", at + 4) - at);
    for (const std::string row : {"grid grid-1", "grid grid-2", "grid grid-3"}) {
      const auto rows = table_rows(part, row);
      ASSERT_EQ(rows.size(), 1u) << row << "\n" << part;
      ASSERT_EQ(rows[0].size(), 6u);
      EXPECT_EQ(rows[0][1], "4");  // the grid's runs
      expect_figures(rows[0], 2, 4, true);
    }
    const auto rows_of_seeds = table_rows(part, "tune seed ");
    ASSERT_EQ(rows_of_seeds.size(), 2u) << part;
    int passes = 0;
    for (const auto& row : rows_of_seeds) {
      ASSERT_EQ(row.size(), 6u);
      EXPECT_EQ(row[1], "3");
      EXPECT_TRUE(row[5].ends_with("x")) << row[5];
      expect_figures(row, 2, 4, true);
      EXPECT_TRUE(row[4] == "yes" || row[4] == "no") << row[4];
      passes += row[4] == "yes";
    }
    EXPECT_NE(part.find(mode + ": tune within 5% of the grid's best in " + std::to_string(passes) +
                        " of 2 seeds"),
              std::string::npos)
        << part;
    for (const std::string knob : {"wait", "precision"}) {
      const auto rows = table_rows(part, knob + " ");
      ASSERT_EQ(rows.size(), 1u) << knob << "\n" << part;
      expect_figures(rows[0], 1, 3, false);
    }
    const auto all = table_rows(part, "all ");
    ASSERT_EQ(all.size(), 1u) << part;
    EXPECT_EQ(all[0][1], "4");
    expect_figures(all[0], 2, 6, true);
  }
}

TEST(BenchScriptCli, EmbedVsOrtRefusesAnUnknownSize) {
  const ScriptRun r = run_script("SIZE=huge");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "embed_vs_ort.sh: SIZE is minilm, base or tiny, not huge\n");
}

}  // namespace
}  // namespace bertfit::testing
