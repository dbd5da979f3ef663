// The sentence-transformers 2.2.2 fixtures of tests/fixtures/st (made by make_st_fixtures.py)
// through the binary (issue 34): `bertfit embed` on the XLM-R folder with CLS + max pooling and no
// Normalize gives encode()'s 32 values per text (≤ 1e-5 abs in fp32, whatever the batch padding);
// and the vectors behind the contrastive and evaluator fixtures are bertfit's: the hard-negative
// score matrix, the cosine-loss cosines, the STS pair cosines and the retrieval scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace bertfit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Vectors = std::vector<std::vector<float>>;

std::string fixtures() { return std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/"; }
std::string st_bert() { return shared_dir() + "/golden/st-bert-mean-tiny/model"; }

std::vector<json> jsonl_of(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

// `bertfit embed` of texts (fp32), one vector per text in order.
Vectors embed(const std::string& model, const std::vector<std::string>& texts,
              const std::string& extra = "") {
  TempDir tmp;
  std::string jsonl;
  for (const std::string& t : texts) jsonl += json{{"text", t}}.dump() + "\n";
  write_text(tmp / "texts.jsonl", jsonl);
  RunResult r = run_bertfit("embed --model " + model + " --input " + (tmp / "texts.jsonl") +
                            " --text-a-column text " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  Vectors out;
  for (const json& line : jsonl_of(r.out)) out.push_back(line["embedding"]);
  EXPECT_EQ(out.size(), texts.size());
  return out;
}

std::vector<std::string> column(const std::vector<json>& rows, const char* key) {
  std::vector<std::string> out;
  for (const json& r : rows) out.push_back(r.at(key));
  return out;
}

TEST(StFixturesCli, XlmrClsMaxEmbeddingsEqualSentenceTransformers) {
  const std::string dir = fixtures() + "xlmr-cls-max-tiny";
  const std::string model = dir + "/model";
  // The folder links xlmr-tiny's weights and SentencePiece model from ../shared.
  for (const char* name : {"model.safetensors", "sentencepiece.bpe.model"}) {
    ASSERT_TRUE(fs::exists(model + "/" + name)) << name << ": the link into ../shared is broken";
    EXPECT_TRUE(
        fs::equivalent(model + "/" + name, shared_dir() + "/golden/xlmr-tiny/model/" + name))
        << name;
  }
  const std::vector<std::string> texts =
      json::parse(read_text(dir + "/texts.json"))["texts"].get<std::vector<std::string>>();
  const std::vector<float> flat = tensors_of(dir + "/golden.safetensors").at("eval.embeddings");
  ASSERT_EQ(flat.size(), texts.size() * 32);  // CLS then max, 16 values each
  // Max pooling must ignore the padding of every batch shape.
  for (const char* batch : {"1", "5", "16"}) {
    SCOPED_TRACE(batch);
    const Vectors got = embed(model, texts, std::string("--batch-size ") + batch);
    ASSERT_EQ(got.size(), texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      ASSERT_EQ(got[i].size(), 32u);
      for (std::size_t k = 0; k < 32; ++k) {
        EXPECT_NEAR(got[i][k], flat[i * 32 + k], 1e-5) << "text " << i << " value " << k;
      }
    }
  }
}

// 20·cos(anchor_i, candidate_j) over [positives, negatives]: the logits of the loss.
TEST(StFixturesCli, HardNegativeScoresAreBertfitsEmbeddings) {
  const std::string dir = fixtures() + "st-bert-hardneg";
  const json t = json::parse(read_text(dir + "/triplets.json"));
  const Vectors a = embed(st_bert(), t["anchor"].get<std::vector<std::string>>());
  std::vector<std::string> candidates = t["positive"].get<std::vector<std::string>>();
  for (const auto& n : t["negative"]) candidates.push_back(n);
  const Vectors c = embed(st_bert(), candidates);
  const std::vector<float> scores = tensors_of(dir + "/golden.safetensors").at("train.scores");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(scores.size(), a.size() * c.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::size_t j = 0; j < c.size(); ++j) {
      EXPECT_NEAR(20 * cosine(a[i], c[j]), scores[i * c.size() + j], 2e-4) << i << "," << j;
    }
  }
}

TEST(StFixturesCli, CosineLossCosinesAreBertfitsEmbeddings) {
  const std::string dir = fixtures() + "st-bert-cosine";
  const std::vector<json> pairs = jsonl_of(read_text(dir + "/pairs.jsonl"));
  ASSERT_EQ(pairs.size(), 8u);
  const Vectors u = embed(st_bert(), column(pairs, "sentence1"));
  const Vectors v = embed(st_bert(), column(pairs, "sentence2"));
  const std::vector<float> cos = tensors_of(dir + "/golden.safetensors").at("train.cos");
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_NEAR(cosine(u[i], v[i]), cos[i], 1e-5) << i;
    EXPECT_DOUBLE_EQ(pairs[i]["label"].get<double>(), pairs[i]["score"].get<double>() / 5) << i;
  }
}

TEST(StFixturesCli, EvaluatorScoresAreBertfitsEmbeddings) {
  const std::string dir = fixtures() + "st-evaluators";
  const json golden = json::parse(read_text(dir + "/golden.json"));
  // EmbeddingSimilarityEvaluator's per-pair cosines.
  const std::vector<json> sts = jsonl_of(read_text(dir + "/sts-dev.jsonl"));
  ASSERT_EQ(sts.size(), 40u);
  const Vectors e1 = embed(st_bert(), column(sts, "sentence1"));
  const Vectors e2 = embed(st_bert(), column(sts, "sentence2"));
  const json& want = golden["embedding_similarity"]["cosine_scores"];
  for (std::size_t i = 0; i < sts.size(); ++i) {
    EXPECT_NEAR(cosine(e1[i], e2[i]), want[i].get<double>(), 1e-5) << i;
  }
  // InformationRetrievalEvaluator's top-10 cosines of each scored query.
  const std::vector<json> queries = jsonl_of(read_text(dir + "/queries.jsonl"));
  const std::vector<json> corpus = jsonl_of(read_text(dir + "/corpus.jsonl"));
  const Vectors q = embed(st_bert(), column(queries, "text"));
  const Vectors d = embed(st_bert(), column(corpus, "text"));
  std::map<std::string, std::size_t> doc_at, query_at;
  for (std::size_t i = 0; i < corpus.size(); ++i) doc_at[corpus[i]["_id"]] = i;
  for (std::size_t i = 0; i < queries.size(); ++i) query_at[queries[i]["_id"]] = i;
  const json& top = golden["information_retrieval"]["cos_sim"]["top10"];
  ASSERT_EQ(top.size(), 20u);  // q20 has no relevant document
  for (const auto& [qid, hits] : top.items()) {
    ASSERT_EQ(hits.size(), 10u);
    for (const json& hit : hits) {
      EXPECT_NEAR(cosine(q[query_at.at(qid)], d[doc_at.at(hit[0])]), hit[1].get<double>(), 1e-5)
          << qid << " " << hit[0];
    }
  }
}

}  // namespace
}  // namespace bertfit::testing
