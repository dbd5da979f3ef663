// Sentence embeddings through the binary (issue 34): `bertfit embed` and serve's /embed on the
// golden sentence-transformers folder (BERT, mean pooling, Normalize) give sentence-transformers
// 2.2.2's encode() of its 16 texts (≤ 1e-5 abs in fp32; bf16 and int8 within their rounding);
// the flags (--normalize, --prompt-name, --id-column, --skip-malformed, --max-seq-len, --output)
// and /embed's options (normalize, dimensions, prompt_name, truncate) do what they say, OpenAI's
// /v1/embeddings gives the same vectors (floats or base64); the
// wrong route or command for a model's head is one clear refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

std::string golden() { return shared_dir() + "/golden/st-bert-mean-tiny"; }

std::vector<std::string> texts() { return fixture_texts(golden()); }

// sentence-transformers' encode(texts): (16, 16) row by row.
std::vector<std::vector<float>> expected() {
  return golden_embeddings(golden() + "/golden.safetensors", texts().size());
}

std::string write_texts(const TempDir& tmp) {
  return write_text_rows(tmp / "texts.jsonl", texts());
}

std::vector<json> lines_of(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// The float32 values of a base64 string (RFC 4648, padded), decoded here independently.
std::vector<float> floats_of_base64(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  unsigned bits = 0, value = 0;
  for (char ch : text) {
    if (ch == '=') break;
    value = (value << 6) | static_cast<unsigned>(alphabet.find(ch));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((value >> bits) & 0xFF));
    }
  }
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST(EmbedCli, EmbeddingsEqualSentenceTransformersInEveryPrecision) {
  TempDir tmp;
  const std::string input = write_texts(tmp);
  const auto want = expected();
  // fp32: sentence-transformers' own numbers; bf16 and int8: the rounding of their products
  // (bf16 ~1.6e-3 relative per product over 2 layers; int8 as the matrix test argues), on unit
  // vectors of 16 values.
  for (const auto& [precision, tol] :
       {std::pair{"fp32", 1e-5}, std::pair{"bf16", 2e-2}, std::pair{"int8", 6e-2}}) {
    SCOPED_TRACE(precision);
    RunResult r = run_bertfit("embed --model " + golden() + "/model --input " + input +
                              " --text-a-column text --batch-size 5 --precision " + precision);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << r.err;  // nothing to warn about (the unused pooler is not)
    const std::vector<json> lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), want.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i]["row"], i);
      EXPECT_LE(max_abs_diff(lines[i]["embedding"].get<std::vector<float>>(), want[i]), tol)
          << "row " << i;
    }
  }
}

TEST(EmbedCli, FlagsAndRefusals) {
  TempDir tmp;
  const std::string model = tmp / "st";
  fs::copy(golden() + "/model", model, fs::copy_options::recursive);
  // Prompts as sentence-transformers 3 writes them; the normalized model gives unit vectors.
  write_text(model + "/config_sentence_transformers.json",
             R"({"prompts": {"query": "query: ", "doc": ""}, "default_prompt_name": null,
                 "similarity_fn_name": "cosine"})");
  write_text(tmp / "rows.csv", "id,text\nq1,a charming journey\nbroken\nq3,\"slow, very slow\"\n");
  RunResult r = run_bertfit("embed --model " + model + " --input " + (tmp / "rows.csv") +
                            " --text-a-column text --id-column id --skip-malformed --output " +
                            (tmp / "out.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> lines = lines_of(read_text(tmp / "out.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], "q1");
  EXPECT_TRUE(lines[1].contains("skipped")) << lines[1];
  EXPECT_EQ(lines[2]["row"], 2);
  const auto plain = lines[0]["embedding"].get<std::vector<float>>();
  double sq = 0;
  for (float v : plain) sq += double{v} * v;
  EXPECT_NEAR(sq, 1.0, 1e-5);
  // config.json naming the checkpoint it came from (a masked LM) changes nothing: the modules
  // decide, as sentence-transformers loads the base model whatever the class.
  json config = json::parse(read_text(model + "/config.json"));
  config["architectures"] = {"BertForMaskedLM"};
  write_text(model + "/config.json", config.dump());
  write_text(tmp / "one.csv", "text\na charming journey\n");
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(lines_of(r.out)[0]["embedding"], json(plain));
  // --prompt-name puts the prompt's text first: the same as embedding "query: " + text.
  write_text(tmp / "one.csv", "text\na charming journey\n");
  write_text(tmp / "prefixed.csv", "text\nquery: a charming journey\n");
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text --prompt-name query");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult p = run_bertfit("embed --model " + model + " --input " + (tmp / "prefixed.csv") +
                            " --text-a-column text");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(lines_of(r.out)[0]["embedding"], lines_of(p.out)[0]["embedding"]);
  EXPECT_NE(lines_of(r.out)[0]["embedding"], json(plain));
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text --prompt-name passage");
  EXPECT_NE(r.err.find("--prompt-name passage: the model's prompts are doc, query"),
            std::string::npos)
      << r.err;
  // A row longer than --max-seq-len (the folder's max_seq_length, 64, otherwise) is an error
  // naming its line, as TEI's truncate false; --truncate cuts it: 3 tokens keep [CLS] a [SEP].
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text --max-seq-len 3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("one.csv:2: the row is 5 tokens, longer than the 3 the model takes "
                       "(--max-seq-len); --truncate cuts such rows"),
            std::string::npos)
      << r.err;
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text --max-seq-len 3 --truncate");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write_text(tmp / "a.csv", "text\na\n");
  p = run_bertfit("embed --model " + model + " --input " + (tmp / "a.csv") +
                  " --text-a-column text");
  EXPECT_EQ(lines_of(r.out)[0]["embedding"], lines_of(p.out)[0]["embedding"]);
  // Without Normalize, --normalize makes unit vectors.
  json modules = json::parse(read_text(model + "/modules.json"));
  modules.erase(2);
  write_text(model + "/modules.json", modules.dump());
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto raw = lines_of(r.out)[0]["embedding"].get<std::vector<float>>();
  sq = 0;
  for (float v : raw) sq += double{v} * v;
  EXPECT_GT(std::abs(sq - 1.0), 1e-3);
  r = run_bertfit("embed --model " + model + " --input " + (tmp / "one.csv") +
                  " --text-a-column text --normalize");
  EXPECT_LE(max_abs_diff(lines_of(r.out)[0]["embedding"].get<std::vector<float>>(), plain), 1e-6);
  // The commands for classifiers refuse an embedding model in one line.
  const std::string st = golden() + "/model";
  write_text(tmp / "labelled.csv", "text,label\na,0\n");
  write_text(tmp / "batch.json", R"({"input_ids": [[101, 1037, 102]], "labels": [0]})");
  for (const auto& [args, needle] :
       {std::pair{
            "predict --model " + st + " --input " + (tmp / "one.csv") + " --text-a-column text",
            std::string("is a sentence embedder: `bertfit embed` gives its vectors")},
        std::pair{"eval --model " + st + " --dev-file " + (tmp / "labelled.csv") +
                      " --text-a-column text --label-column label",
                  std::string("sentence-embedding rows need --text-a-column (the anchor or first "
                              "text) and --text-b-column")},
        std::pair{"forward --model " + st + " --batch " + (tmp / "batch.json"),
                  std::string("a sentence embedder takes no labels")},
        std::pair{"bench train --model " + st + " --steps 1 --batch-size 3",
                  std::string("a sentence embedder trains on pairs of texts; give an even")}}) {
    r = run_bertfit(args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
  }
  // bench train times an embedder's step as train runs it (pairs under MNRL).
  r = run_bertfit("bench train --model " + st + " --steps 1 --batch-size 4 --seq-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(last_line(r.out))["mode"], "train");
  // forward without labels prints the embeddings.
  write_text(tmp / "batch.json", R"({"input_ids": [[101, 1037, 102]]})");
  r = run_bertfit("forward --model " + st + " --batch " + (tmp / "batch.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["logits"][0].size(), 16u);
  // A classifier is not an embedding model.
  init_tiny_model(tmp / "cls", "bert");
  r = run_bertfit("embed --model " + (tmp / "cls") + " --input " + (tmp / "one.csv") +
                  " --text-a-column text");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is not a sentence-transformers folder (no modules.json); give --pooling"),
            std::string::npos)
      << r.err;
}

TEST(EmbedCli, ServeEmbedEqualsEmbedCommand) {
  TempDir tmp;
  const std::string input = write_texts(tmp);
  const auto want = expected();
  ServeProcess server("--model " + golden() + "/model --max-batch-tokens 4096");
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  const std::vector<std::string> all = texts();
  HttpReply r = client.post("/embed", json{{"inputs", all}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json vectors = json::parse(r.body);
  ASSERT_EQ(vectors.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_LE(max_abs_diff(vectors[i].get<std::vector<float>>(), want[i]), 1e-5) << i;
  }
  // One text: still a list of vectors.
  r = client.post("/embed", json{{"inputs", all[0]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).size(), 1u);
  // dimensions: the first values, renormalized.
  r = client.post("/embed", json{{"inputs", all[0]}, {"dimensions", 4}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const auto cut = json::parse(r.body)[0].get<std::vector<float>>();
  ASSERT_EQ(cut.size(), 4u);
  double norm = 0;
  for (int k = 0; k < 4; ++k) norm += double{want[0][k]} * want[0][k];
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(cut[k], want[0][k] / std::sqrt(norm), 1e-5);
  // Refusals.
  for (const auto& [body, status] :
       {std::pair{json{{"inputs", "a"}, {"dimensions", 17}}.dump(), 422},
        std::pair{json{{"inputs", "a"}, {"prompt_name", "query"}}.dump(), 422},
        std::pair{json{{"inputs", {1.5, 2}}}.dump(), 400},
        std::pair{json{{"inputs", json::array()}}.dump(), 400}}) {
    r = client.post("/embed", body);
    EXPECT_EQ(r.status, status) << body << ": " << r.body;
  }
  // OpenAI's form: the same vectors, as floats or base64 of their float32 bytes.
  r = client.post("/v1/embeddings", json{{"input", all}, {"model", "m"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json openai = json::parse(r.body);
  EXPECT_EQ(openai["object"], "list");
  // TEI's served_model_name (--model as given), whatever the request says.
  EXPECT_EQ(openai["model"], golden() + "/model");
  ASSERT_EQ(openai["data"].size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(openai["data"][i]["index"], i);
    EXPECT_EQ(openai["data"][i]["embedding"], vectors[i]);
  }
  EXPECT_GT(openai["usage"]["prompt_tokens"].get<int>(), static_cast<int>(all.size()) * 3);
  r = client.post("/v1/embeddings", json{{"input", all[1]}, {"encoding_format", "base64"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(floats_of_base64(json::parse(r.body)["data"][0]["embedding"]),
            vectors[1].get<std::vector<float>>());
  r = client.post("/v1/embeddings", json{{"input", "a"}, {"encoding_format", "int8"}}.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  r = client.post("/predict", json{{"inputs", "a"}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  EXPECT_NE(r.body.find("Model is not a classifier model: the model is a sentence embedder (task "
                        "feature-extraction); /predict needs a classifier"),
            std::string::npos)
      << r.body;
  const json info = json::parse(client.get("/info").body);
  EXPECT_EQ(info["task"], "feature-extraction");
  EXPECT_EQ(info["model_type"]["embedding"]["pooling"], "mean");
  // A classifier's server refuses /embed, naming what the model is.
  init_tiny_model(tmp / "cls", "bert");
  ServeProcess classifier("--model " + (tmp / "cls"));
  ASSERT_TRUE(classifier.started()) << classifier.err();
  HttpClient c2(classifier.port());
  r = c2.post("/v1/embeddings", json{{"input", "a"}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  r = c2.post("/embed", json{{"inputs", "a"}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  EXPECT_NE(r.body.find("Model is not an embedding model: the model is a sequence classifier of 2 "
                        "outputs (task text-classification); /embed needs an embedding model"),
            std::string::npos)
      << r.body;
}

// /rerank on a cross-encoder (a sequence classifier with one output): the sigmoid of `predict`'s
// score of each (query, text) pair (raw with raw_scores), sorted by score with each text's index
// (and text with return_text); any other model is refused naming what it is.
TEST(EmbedCli, RerankEqualsPredictsPairScoresSorted) {
  TempDir tmp;
  const std::string model = tmp / "cross";
  init_tiny_model(model, "bert", 1);
  const std::string query = "what is a charming journey";
  const std::vector<std::string> docs = {"a charming and affecting journey", "unflinchingly bleak",
                                         "taxes with your ex-wife", "", "a charming journey"};
  std::string csv = "q,t\n";
  for (const std::string& d : docs) csv += "\"" + query + "\",\"" + d + "\"\n";
  write_text(tmp / "pairs.csv", csv);
  RunResult p = run_bertfit("predict --model " + model + " --input " + (tmp / "pairs.csv") +
                            " --text-a-column q --text-b-column t");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::vector<json> lines = lines_of(p.out);
  ASSERT_EQ(lines.size(), docs.size());
  ServeProcess server("--model " + model);
  ASSERT_TRUE(server.started()) << server.err();
  HttpClient client(server.port());
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw);
    HttpReply r = client.post(
        "/rerank",
        json{{"query", query}, {"texts", docs}, {"raw_scores", raw}, {"return_text", raw}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json ranked = json::parse(r.body);
    ASSERT_EQ(ranked.size(), docs.size());
    double previous = 1e300;
    std::vector<bool> seen(docs.size(), false);
    for (const json& item : ranked) {
      const std::size_t i = item["index"];
      ASSERT_LT(i, docs.size());
      seen[i] = true;
      const double logit = lines[i]["score"];
      const double want = raw ? logit : 1.0 / (1.0 + std::exp(-logit));
      EXPECT_NEAR(item["score"].get<double>(), want, 1e-5) << item;
      EXPECT_LE(item["score"].get<double>(), previous);
      previous = item["score"];
      EXPECT_EQ(item.contains("text"), raw);
      if (raw) {
        EXPECT_EQ(item["text"], docs[i]);
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(docs.size()));
  }
  for (const auto& [body, status] :
       {std::pair{json{{"query", "q"}}.dump(), 400},
        std::pair{json{{"query", "q"}, {"texts", json::array()}}.dump(), 400},
        std::pair{json{{"query", 1}, {"texts", {"a"}}}.dump(), 400}}) {
    HttpReply r = client.post("/rerank", body);
    EXPECT_EQ(r.status, status) << body << ": " << r.body;
  }
  // A classifier of two labels is no cross-encoder.
  init_tiny_model(tmp / "two", "bert", 2);
  ServeProcess two("--model " + (tmp / "two"));
  ASSERT_TRUE(two.started()) << two.err();
  HttpClient c2(two.port());
  HttpReply r = c2.post("/rerank", json{{"query", "q"}, {"texts", {"a"}}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  EXPECT_NE(r.body.find("model is not a re-ranker model: the model is a sequence classifier of 2 "
                        "outputs (task text-classification); /rerank needs a cross-encoder"),
            std::string::npos)
      << r.body;
}

}  // namespace
}  // namespace bertfit::testing
