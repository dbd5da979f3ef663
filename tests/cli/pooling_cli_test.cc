// --pooling (TEI's flag) through the binary: a plain encoder folder served as a sentence
// embedder by `embed` and `serve`, against sentence-transformers' numbers. XLM-R's CLS and max
// vectors are the two halves of tests/fixtures/st/xlmr-cls-max-tiny's CLS+max embeddings of the
// same encoder (../shared/golden/xlmr-tiny); BERT's mean pooling, normalized, is
// st-bert-mean-tiny's embedding of its encoder without the sentence-transformers files.
#include <gtest/gtest.h>

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

// Golden (n, D) rows, columns [from, from + width) of each.
std::vector<std::vector<float>> golden_rows(const std::string& file, std::size_t n, int from,
                                            int width) {
  const std::vector<float> all = tensors_of(file).at("eval.embeddings");
  const std::size_t D = all.size() / n;
  std::vector<std::vector<float>> rows;
  for (std::size_t i = 0; i < n; ++i) {
    rows.emplace_back(all.begin() + i * D + from, all.begin() + i * D + from + width);
  }
  return rows;
}

void expect_rows_near(const std::vector<std::vector<float>>& got,
                      const std::vector<std::vector<float>>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << i;
    for (std::size_t k = 0; k < got[i].size(); ++k) {
      EXPECT_NEAR(got[i][k], want[i][k], tol) << i << "," << k;
    }
  }
}

TEST(PoolingCli, PlainXlmrEncoderPoolsLikeSentenceTransformers) {
  const std::string fixture =
      std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/xlmr-cls-max-tiny";
  const std::string plain = shared_dir() + "/golden/xlmr-tiny/model";
  TempDir tmp;
  const std::vector<std::string> texts = fixture_texts(fixture);
  const std::string input = write_text_rows(tmp / "texts.jsonl", texts);
  for (const auto& [mode, from] : {std::pair{"cls", 0}, std::pair{"max", 16}}) {
    SCOPED_TRACE(mode);
    RunResult r = run_bertfit("embed --model " + plain + " --pooling " + mode + " --input " +
                              input + " --text-a-column text --max-seq-len 64");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_rows_near(embeddings_of(r.out),
                     golden_rows(fixture + "/golden.safetensors", texts.size(), from, 16), 1e-5);
  }
}

// st-bert-mean-tiny's encoder without modules.json & co: --pooling mean and --normalize give
// the folder's embeddings, through embed and through serve's /embed (normalize defaults to true
// there, as TEI's).
TEST(PoolingCli, PlainBertEncoderEmbedsAndServes) {
  const std::string golden = shared_dir() + "/golden/st-bert-mean-tiny";
  TempDir tmp;
  const std::string plain = tmp / "plain";
  fs::create_directories(plain);
  for (const char* f : {"config.json", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json"}) {
    fs::copy_file(golden + "/model/" + f, plain + "/" + f);
  }
  const std::vector<std::string> texts = fixture_texts(golden);
  const std::string input = write_text_rows(tmp / "texts.jsonl", texts);
  const auto want = golden_rows(golden + "/golden.safetensors", texts.size(), 0, 16);
  RunResult r = run_bertfit("embed --model " + plain + " --pooling mean --normalize --input " +
                            input + " --text-a-column text --max-seq-len 64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_rows_near(embeddings_of(r.out), want, 1e-5);
  // Without --pooling the folder is not an embedder.
  RunResult refused =
      run_bertfit("embed --model " + plain + " --input " + input + " --text-a-column text");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(
      refused.err.find("is not a sentence-transformers folder (no modules.json); give --pooling"),
      std::string::npos)
      << refused.err;
  RunResult bad = run_bertfit("embed --model " + plain + " --pooling splade --input " + input +
                              " --text-a-column text");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--pooling"), std::string::npos) << bad.err;

  ServeProcess server("--model " + plain + " --pooling mean --max-batch-tokens 4096");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply reply = client.post("/embed", json{{"inputs", texts}}.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  std::vector<std::vector<float>> served;
  for (const auto& v : json::parse(reply.body)) served.push_back(v.get<std::vector<float>>());
  expect_rows_near(served, want, 1e-5);
  HttpReply info = client.request("GET", "/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_NE(info.body.find("/embed"), std::string::npos) << info.body;
}

// sentence_bert_config.json's do_lower_case: the Transformer module lowercases every text
// (str.lower()) before its tokenizer, a case-sensitive SentencePiece here: "Hello World" through
// the lowercasing folder is "hello world" through the original, in embed and in serve's
// /embed; a folder trained from it keeps the setting.
TEST(EmbedLowerCase, TheTransformerModulesDoLowerCaseLowercasesTheInput) {
  const std::string fixture =
      std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/xlmr-cls-max-tiny/model";
  TempDir tmp;
  const std::string lower = tmp / "lower";
  fs::copy(fixture, lower, fs::copy_options::recursive);
  json config = json::parse(read_text(lower + "/sentence_bert_config.json"));
  config["do_lower_case"] = true;
  write_text(lower + "/sentence_bert_config.json", config.dump());
  write_text(tmp / "upper.jsonl", R"({"text": "Hello World, ÉTÉ"})"
                                  "\n");
  write_text(tmp / "lower.jsonl", R"({"text": "hello world, été"})"
                                  "\n");
  auto embed = [&](const std::string& model, const std::string& input) {
    RunResult r =
        run_bertfit("embed --model " + model + " --input " + input + " --text-a-column text");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? embeddings_of(r.out) : std::vector<std::vector<float>>{};
  };
  const auto lowered = embed(lower, tmp / "upper.jsonl");
  const auto original_lower = embed(fixture, tmp / "lower.jsonl");
  const auto original_upper = embed(fixture, tmp / "upper.jsonl");
  ASSERT_EQ(lowered.size(), 1u);
  EXPECT_EQ(lowered, original_lower);
  EXPECT_NE(lowered, original_upper);
  ServeProcess server("--model " + lower);
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  HttpReply reply =
      client.post("/embed", json{{"inputs", "Hello World, ÉTÉ"}, {"normalize", false}}.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  std::vector<std::vector<float>> served;
  for (const auto& v : json::parse(reply.body)) served.push_back(v.get<std::vector<float>>());
  expect_rows_near(served, original_lower, 1e-6);
  RunResult t = run_bertfit("train --model " + lower + " --train-file " + (tmp / "upper.jsonl") +
                            " --text-a-column text --text-b-column text --max-steps 1 --output " +
                            (tmp / "out"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_TRUE(
      json::parse(read_text(tmp / "out/sentence_bert_config.json"))["do_lower_case"].get<bool>());
}

}  // namespace
}  // namespace bertfit::testing
