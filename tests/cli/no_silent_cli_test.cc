// Never a number from missing labels or broken inputs, through the binary: eval on an unlabelled
// GLUE split is an error pointing to predict; weights holding NaN or infinity are refused at
// load naming the tensor; truncation is counted on stderr (rows and tokens cut) by train, eval
// and predict; an input with no data rows is an error naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;

std::string glue(const std::string& task) { return shared_dir() + "/data/glue/" + task; }

void expect_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(NoSilentCli, EvalOnAnUnlabelledSplitPointsToPredict) {
  TempDir tmp;
  init_tiny_model(tmp / "m", "distilbert", 2);
  init_tiny_model(tmp / "r", "distilbert", 1);
  for (auto [model, task, folder] :
       {std::tuple{"m", "sst2", "SST-2"}, std::tuple{"m", "mrpc", "MRPC"},
        std::tuple{"r", "stsb", "STS-B"}}) {
    RunResult r = run_bertfit("eval --model " + (tmp / model) + " --task " + task + " --data " +
                              glue(folder) + " --split test --max-seq-len 32");
    expect_error(r, "has no labels");
    EXPECT_NE(r.err.find("bertfit predict"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(glue(folder) + "/test.tsv"), std::string::npos) << r.err;
  }
}

// A copy of model folder `from` whose tensor `name` holds `value` at element 1.
void poison(const std::string& from, const std::string& to, const std::string& name, float value) {
  fs::copy(from, to, fs::copy_options::recursive);
  const std::string path = to + "/model.safetensors";
  std::map<std::string, std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  {
    SafetensorsFile f = SafetensorsFile::open(path);
    for (const TensorInfo& t : f.tensors()) {
      std::vector<float>& v = data[t.name];
      v.resize(t.shape.numel());
      f.read_f32(t, v.data());
      if (t.name == name) v.at(1) = value;
    }
    for (const TensorInfo& t : f.tensors()) {
      tensors.push_back({t.name, SafetensorsDType::kF32, t.shape, data[t.name].data()});
    }
  }
  write_safetensors(path + ".new", tensors);
  fs::rename(path + ".new", path);
}

TEST(NoSilentCli, NonFiniteWeightsAreRefusedNamingTheTensor) {
  TempDir tmp;
  init_tiny_model(tmp / "m", "distilbert", 2);
  write_text(tmp / "in.tsv", "text\na good film\n");
  const std::string tensor = "distilbert.transformer.layer.0.attention.q_lin.weight";
  poison(tmp / "m", tmp / "nan", tensor, std::numeric_limits<float>::quiet_NaN());
  poison(tmp / "m", tmp / "inf", "classifier.bias", -std::numeric_limits<float>::infinity());
  RunResult r = run_bertfit("predict --model " + (tmp / "nan") + " --input " + (tmp / "in.tsv") +
                            " --text-a-column text");
  expect_error(r, "'" + tensor + "'");
  EXPECT_NE(r.err.find("nan"), std::string::npos) << r.err;
  r = run_bertfit("eval --model " + (tmp / "inf") + " --task sst2 --data " + glue("SST-2"));
  expect_error(r, "'classifier.bias'");
  r = run_bertfit("train --model " + (tmp / "nan") + " --output " + (tmp / "out") +
                  " --task sst2 --data " + glue("SST-2") + " --max-steps 1");
  expect_error(r, "'" + tensor + "'");
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

TEST(NoSilentCli, TruncationIsCountedByTrainEvalAndPredict) {
  TempDir tmp;
  init_tiny_model(tmp / "m", "distilbert", 2);
  // Row 2: 40 words, each one token ("a"), cut to 16 - 2 = 14: 26 tokens cut. Row 1 fits.
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "a ";
  write_text(tmp / "d.tsv", "text\tlabel\nshort one\t0\n" + long_text + "\t1\n");
  const std::string cut =
      "1 of 2 rows are longer than --max-seq-len 16 tokens and were "
      "truncated (26 tokens cut)";
  RunResult r = run_bertfit("predict --model " + (tmp / "m") + " --input " + (tmp / "d.tsv") +
                            " --text-a-column text --max-seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("d.tsv"), std::string::npos) << r.err;
  const std::string columns = " --text-a-column text --label-column label --max-seq-len 16";
  r = run_bertfit("eval --model " + (tmp / "m") + " --dev-file " + (tmp / "d.tsv") + columns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  r = run_bertfit("train --model " + (tmp / "m") + " --output " + (tmp / "out") + " --train-file " +
                  (tmp / "d.tsv") + columns + " --max-steps 1 --eval-every never");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  // Nothing cut: nothing said.
  r = run_bertfit("predict --model " + (tmp / "m") + " --input " + (tmp / "d.tsv") +
                  " --text-a-column text --max-seq-len 64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST(NoSilentCli, InputWithoutDataRowsIsAnErrorNamingTheFile) {
  TempDir tmp;
  init_tiny_model(tmp / "m", "distilbert", 2);
  write_text(tmp / "header.tsv", "text\n");
  write_text(tmp / "empty.jsonl", "");
  for (const char* file : {"header.tsv", "empty.jsonl"}) {
    RunResult r = run_bertfit("predict --model " + (tmp / "m") + " --input " + (tmp / file) +
                              " --text-a-column text");
    expect_error(r, tmp / file);
  }
}

}  // namespace
}  // namespace bertfit::testing
