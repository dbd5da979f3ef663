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

std::vector<std::string> texts() { return fixture_texts(fixture()); }

// sentence-transformers' encode(texts): (16, 8) row by row.
std::vector<std::vector<float>> expected() {
  auto rows = golden_embeddings(fixture() + "/golden.safetensors", texts().size());
  EXPECT_EQ(rows.front().size(), 8u);
  return rows;
}

std::string write_texts(const TempDir& tmp) {
  return write_text_rows(tmp / "texts.jsonl", texts());
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
  // Each case sets one key of 2_Dense/config.json in a fresh copy; the error is one line naming
  // the file at fault.
  const struct {
    const char* key;
    json value;
    std::string message;  // after the copy's folder
  } cases[] = {
      // config.json says 6 outputs; the weights hold 8.
      {"out_features", 6,
       "/2_Dense/pytorch_model.bin: tensor 'linear.weight' has shape [8, 16], expected [6, 16]"},
      {"activation_function", "torch.nn.modules.activation.Sigmoid",
       "/2_Dense/config.json: key 'activation_function' value "
       "'torch.nn.modules.activation.Sigmoid' is not supported"},
      {"bias", false, "/2_Dense/config.json: a Dense module without a bias"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    const std::string model = copy_model(tmp);
    json config = json::parse(read_text(model + "/2_Dense/config.json"));
    config[c.key] = c.value;
    write_text(model + "/2_Dense/config.json", config.dump());
    RunResult r =
        run_bertfit("embed --model " + model + " --input " + input + " --text-a-column text");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(model + c.message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    fs::remove_all(model);
  }
}

}  // namespace
}  // namespace bertfit::testing
