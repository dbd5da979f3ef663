// The run report: tick values, escaping, the charts' points, the best step, the page's parts, the
// TensorBoard tags of each metrics.jsonl key, and errors naming the file and line.
#include "report/report.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/file.h"
#include "report/svg_chart.h"
#include "tests/util/temp_dir.h"

namespace bertfit::report {
namespace {

using nlohmann::json;

long count(const std::string& text, const std::string& needle) {
  long n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Report, NiceTicksAndEscaping) {
  EXPECT_EQ(nice_ticks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const std::vector<double> t = nice_ticks(3, 997);
  EXPECT_LE(t.front(), 3);
  EXPECT_GE(t.back(), 997);
  EXPECT_EQ(t[1] - t[0], 200);
  const std::vector<double> flat = nice_ticks(0.5, 0.5);  // one value: padded around it
  EXPECT_LT(flat.front(), 0.5);
  EXPECT_GT(flat.back(), 0.5);
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(Report, ChartPointsMarkersAndEmptyCharts) {
  Series s{"loss", "#123456", {{1, 0.5}, {2, NAN}, {3, 0.25}}, true};
  const std::string svg = line_chart("L <1>", "step", {s}, Marker{2, "best"});
  EXPECT_EQ(count(svg, "<polyline"), 1);
  EXPECT_EQ(count(svg, "<circle"), 2);  // the NaN point is left out
  EXPECT_EQ(count(svg, "class=\"best\""), 1);
  EXPECT_NE(svg.find("L &lt;1&gt;"), std::string::npos);
  const std::string empty = line_chart("nothing", "step", {Series{"x", "#000", {}, false}}, {});
  EXPECT_NE(empty.find("no data"), std::string::npos);
  EXPECT_EQ(count(empty, "<polyline"), 0);
}

RunRecords sample_run() {
  RunRecords run;
  for (int step = 10; step <= 40; step += 10) {
    run.steps.push_back({{"step", step},
                         {"epoch", step / 40.0},
                         {"loss", 1.0 / step},
                         {"lr", 1e-3 * (40 - step) / 30},
                         {"grad_norm", 0.5},
                         {"samples_per_s", 100 + step}});
  }
  const double losses[] = {0.7, 0.6, 0.65, 0.66};
  for (int i = 0; i < 4; ++i) {
    run.evals.push_back({{"step", 10 * (i + 1)},
                         {"split", "dev"},
                         {"eval_loss", losses[i]},
                         {"eval_accuracy", 0.5 + 0.1 * i},
                         {"eval_examples", 408}});
  }
  run.final = {{"final", true}, {"steps", 40}, {"train_seconds", 8.0}};
  run.settings = {{"lr", 0.001}, {"task", "mrpc <x>"}};
  return run;
}

TEST(Report, PageHasEveryCurveTheBestStepAndTheSettings) {
  RunRecords run = sample_run();
  EXPECT_EQ(best_step(run), 20);  // the lowest eval_loss
  const std::string page = render_report(run, "run <one>");
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("<title>run &lt;one&gt;</title>"), std::string::npos);
  for (const char* title :
       {">Loss<", ">Learning rate<", ">accuracy<", ">Throughput", ">Gradient norm<"}) {
    EXPECT_NE(page.find(title), std::string::npos) << title;
  }
  EXPECT_EQ(count(page, "<svg"), 5);
  EXPECT_EQ(count(page, "class=\"best\""), 5);  // on every chart
  EXPECT_NE(page.find("best: step 20"), std::string::npos);
  EXPECT_NE(page.find("mrpc &lt;x&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // no external
  EXPECT_EQ(page.find("https://"), std::string::npos);
  // A run that chose its best step says so; a run without evaluations has none.
  run.final["best_step"] = 30;
  EXPECT_EQ(best_step(run), 30);
  run.evals.clear();
  run.final.erase("best_step");
  EXPECT_FALSE(best_step(run));
}

TEST(Report, TensorBoardTagsAreTrainersNames) {
  EXPECT_EQ(tensorboard_tag("loss", ""), "train/loss");
  EXPECT_EQ(tensorboard_tag("lr", ""), "train/learning_rate");
  EXPECT_EQ(tensorboard_tag("epoch", ""), "train/epoch");
  EXPECT_EQ(tensorboard_tag("eval_loss", "dev"), "eval/loss");
  EXPECT_EQ(tensorboard_tag("eval_accuracy", "dev"), "eval/accuracy");
  EXPECT_EQ(tensorboard_tag("eval_accuracy", "dev_mismatched"), "eval_dev_mismatched/accuracy");
  EXPECT_EQ(tensorboard_tag("train_seconds", ""), "train/train_runtime");
  EXPECT_FALSE(tensorboard_tag("eval_examples", "dev"));
  EXPECT_FALSE(tensorboard_tag("forward_s", ""));
  EXPECT_FALSE(tensorboard_tag("step", ""));
}

TEST(Report, ReadRunNamesTheFileAndLine) {
  testing::TempDir tmp;
  try {
    read_run(tmp.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl"), std::string::npos) << e.what();
  }
  write_file_atomic(tmp / "metrics.jsonl", "{\"step\": 1, \"loss\": 0.5, \"lr\": 1}\n{oops\n");
  try {
    read_run(tmp.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2"), std::string::npos) << e.what();
  }
  write_file_atomic(tmp / "metrics.jsonl",
                    "{\"step\": 1, \"loss\": 0.5, \"lr\": 1}\n"
                    "{\"step\": 1, \"split\": \"dev\", \"eval_loss\": 0.4}\n"
                    "{\"final\": true, \"steps\": 1}\n");
  RunRecords run = read_run(tmp.path());
  EXPECT_EQ(run.steps.size(), 1u);
  EXPECT_EQ(run.evals.size(), 1u);
  EXPECT_TRUE(run.final.is_object());
  EXPECT_TRUE(run.settings.is_null());
  // An extended run (train --resume with a larger --max-steps): the final record that counts is
  // the last one; while the extension runs, the run is not finished.
  const std::string extended =
      "{\"step\": 1, \"loss\": 0.5, \"lr\": 1}\n"
      "{\"final\": true, \"steps\": 1, \"best_step\": 1}\n"
      "{\"step\": 2, \"loss\": 0.4, \"lr\": 1}\n";
  write_file_atomic(tmp / "metrics.jsonl", extended);
  run = read_run(tmp.path());
  EXPECT_EQ(run.steps.size(), 2u);
  EXPECT_TRUE(run.final.is_null());
  write_file_atomic(tmp / "metrics.jsonl", extended + "{\"final\": true, \"steps\": 2}\n");
  run = read_run(tmp.path());
  ASSERT_TRUE(run.final.is_object());
  EXPECT_EQ(run.final["steps"], 2);
  EXPECT_FALSE(run.final.contains("best_step"));
}

}  // namespace
}  // namespace bertfit::report
