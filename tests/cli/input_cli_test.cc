// --format and '-' (standard input) on every command that reads a data file: train
// (--train-file, --dev-file), eval (--dev-file), predict and tokenize (--input). A file whose
// extension says nothing is read with --format; standard input without --format is an error
// naming the flag; what is read from standard input equals what is read from the file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

nlohmann::json last_json(const std::string& out) { return nlohmann::json::parse(last_line(out)); }

const std::string kCsv = "text,label\n\"good, really good\",1\nbad,0\n\"fine, fine\",1\nawful,0\n";

class InputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    init_tiny_model(tmp_ / "m", "distilbert", 2);
    write_text(tmp_ / "d.csv", kCsv);
    write_text(tmp_ / "d.data", kCsv);  // an extension that says nothing
  }
  std::string model() const { return " --model " + (tmp_ / "m"); }
  TempDir tmp_;
};

TEST_F(InputCli, PredictAndTokenizeReadStandardInputWithFormat) {
  for (const char* cmd : {"predict", "tokenize"}) {
    const std::string base = std::string(cmd) + model() + " --text-a-column text";
    RunResult file = run_bertfit(base + " --input " + (tmp_ / "d.csv"));
    ASSERT_EQ(file.exit_code, 0) << file.err;
    RunResult in = run_bertfit_stdin(base + " --input - --format csv", kCsv);
    ASSERT_EQ(in.exit_code, 0) << in.err;
    EXPECT_EQ(in.out, file.out) << cmd;
    RunResult odd = run_bertfit(base + " --input " + (tmp_ / "d.data") + " --format csv");
    ASSERT_EQ(odd.exit_code, 0) << odd.err;
    EXPECT_EQ(odd.out, file.out) << cmd;
    RunResult no_format = run_bertfit_stdin(base + " --input -", kCsv);
    EXPECT_EQ(no_format.exit_code, 1) << cmd;
    EXPECT_NE(no_format.err.find("--format"), std::string::npos) << no_format.err;
  }
}

TEST_F(InputCli, EvalAndTrainReadStandardInputWithFormat) {
  const std::string columns = " --text-a-column text --label-column label";
  RunResult file = run_bertfit("eval" + model() + " --dev-file " + (tmp_ / "d.csv") + columns);
  ASSERT_EQ(file.exit_code, 0) << file.err;
  RunResult in = run_bertfit_stdin("eval" + model() + " --dev-file - --format csv" + columns, kCsv);
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out, file.out);

  const std::string train = "train" + model() + columns + " --max-steps 2 --batch-size 2 --lr 0";
  RunResult t =
      run_bertfit_stdin(train + " --output " + (tmp_ / "a") +
                            " --train-file - --format csv --dev-file " + (tmp_ / "d.data"),
                        kCsv);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(last_json(t.out)["eval_accuracy"], last_json(file.out)["eval_accuracy"]);
  // Without --format the extension decides, and a file without one is named.
  t = run_bertfit(train + " --output " + (tmp_ / "b") + " --train-file " + (tmp_ / "d.data"));
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_NE(t.err.find(tmp_ / "d.data"), std::string::npos) << t.err;
  // Standard input read twice is refused.
  t = run_bertfit_stdin(
      train + " --output " + (tmp_ / "c") + " --train-file - --dev-file - --format csv", kCsv);
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_NE(t.err.find("standard input"), std::string::npos) << t.err;
}

}  // namespace
}  // namespace bertfit::testing
