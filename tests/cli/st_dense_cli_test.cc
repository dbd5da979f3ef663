// A sentence-transformers folder with a Dense module after the pooling (issue 34 item 1), the
// fixture tests/fixtures/st/st-bert-dense (make_st_dense_fixture.py: st-bert-mean-tiny's encoder,
// mean pooling, Dense(16 -> 8, Tanh), Normalize): `bertfit embed` and serve's /embed give
// sentence-transformers 2.2.2's encode() (≤ 1e-5 abs in fp32; bf16 and int8 within their
// rounding); a Dense module whose weights disagree with its config.json, or whose activation
// bertfit does not know, is one line naming the file. (Its gradients and training:
// tests/cli/train_embedding_cli_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "serve_client.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture() {
  return std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/st-bert-dense";
}

std::vector<std::string> texts() {
  return json::parse(read_text(fixture() + "/texts.json"))["texts"].get<std::vector<std::string>>();
}

// sentence-transformers' encode(texts): (16, 8) row by row.
std::vector<std::vector<float>> expected() {
  const std::vector<float> flat =
      tensors_of(fixture() + "/golden.safetensors").at("eval.embeddings");
  const std::size_t n = texts().size(), d = flat.size() / n;
  EXPECT_EQ(d, 8u);
  std::vector<std::vector<float>> rows;
  for (std::size_t i = 0; i < n; ++i)
    rows.emplace_back(flat.begin() + i * d, flat.begin() + (i + 1) * d);
  return rows;
}

std::string write_texts(const TempDir& tmp) {
  std::string jsonl;
  for (const std::string& t : texts()) jsonl += json{{"text", t}}.dump() + "\n";
  write_text(tmp / "texts.jsonl", jsonl);
  return tmp / "texts.jsonl";
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, std::abs(double{a[i]} - b[i]));
  }
  return m;
}

TEST(StDenseCli, EmbedEqualsSentenceTransformersInEveryPrecision) {
  TempDir tmp;
  const std::string input = write_texts(tmp);
  const auto want = expected();
  for (const auto& [precision, tol] :
       {std::pair{"fp32", 1e-5}, std::pair{"bf16", 3e-2}, std::pair{"int8", 8e-2}}) {
    SCOPED_TRACE(precision);
    RunResult r = run_bertfit("embed --model " + fixture() + "/model --input " + input +
                              " --text-a-column text --batch-size 5 --precision " + precision);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << r.err;
    std::istringstream in(r.out);
    std::size_t i = 0;
    for (std::string line; std::getline(in, line); ++i) {
      ASSERT_LT(i, want.size());
      const json j = json::parse(line);
      EXPECT_LE(max_abs_diff(j["embedding"].get<std::vector<float>>(), want[i]), tol)
          << "row " << i;
    }
    EXPECT_EQ(i, want.size());
  }
}

TEST(StDenseCli, ServeEmbedEqualsSentenceTransformers) {
  const auto want = expected();
  ServeProcess server("--model " + fixture() + "/model --max-batch-tokens 4096");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply r = client.post("/embed", json{{"inputs", texts()}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json vectors = json::parse(r.body);
  ASSERT_EQ(vectors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(max_abs_diff(vectors[i].get<std::vector<float>>(), want[i]), 1e-5) << i;
  }
  r = client.get("/info");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"dimensions\":8"), std::string::npos) << r.body;
}

// A copy of the fixture's folder (links resolved) to break.
std::string copy_model(const TempDir& tmp) {
  const std::string to = tmp / "model";
  fs::copy(fixture() + "/model", to, fs::copy_options::recursive);
  return to;
}

TEST(StDenseCli, DenseErrorsNameTheFile) {
  TempDir tmp;
  const std::string input = write_texts(tmp);
  {
    // config.json says 6 outputs; the weights hold 8.
    const std::string model = copy_model(tmp);
    json config = json::parse(read_text(model + "/2_Dense/config.json"));
    config["out_features"] = 6;
    write_text(model + "/2_Dense/config.json", config.dump());
    RunResult r =
        run_bertfit("embed --model " + model + " --input " + input + " --text-a-column text");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(model + "/2_Dense/pytorch_model.bin: tensor 'linear.weight' has shape "
                                 "[8, 16], expected [6, 16]"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    fs::remove_all(model);
  }
  {
    const std::string model = copy_model(tmp);
    json config = json::parse(read_text(model + "/2_Dense/config.json"));
    config["activation_function"] = "torch.nn.modules.activation.Sigmoid";
    write_text(model + "/2_Dense/config.json", config.dump());
    RunResult r =
        run_bertfit("embed --model " + model + " --input " + input + " --text-a-column text");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(model + "/2_Dense/config.json: key 'activation_function' value "
                                 "'torch.nn.modules.activation.Sigmoid' is not supported"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    fs::remove_all(model);
  }
  {
    const std::string model = copy_model(tmp);
    json config = json::parse(read_text(model + "/2_Dense/config.json"));
    config["bias"] = false;
    write_text(model + "/2_Dense/config.json", config.dump());
    RunResult r =
        run_bertfit("embed --model " + model + " --input " + input + " --text-a-column text");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(model + "/2_Dense/config.json: a Dense module without a bias"),
              std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace bertfit::testing
