// Retrieval evaluation of sentence embedders through the binary (--queries, --corpus, --qrels):
//  * `eval` against every number sentence-transformers 2.2.2's InformationRetrievalEvaluator
//    gave on tests/fixtures/st/st-evaluators (README there), for cos_sim and dot_score;
//  * a corpus with titles (not embedded: the same numbers, said on stderr), integer _ids;
//  * `train` evaluating on the set at --eval-every: the records of metrics.jsonl, the best model
//    by eval_cosine_ndcg@10 by default or by --metric-for-best-model, eval agreeing with train;
//  * every user error, one line naming the flag or the file and line.
// Tolerance 1e-6: the metrics are means of per-query values fixed by the ranks alone, and the
// fixture keeps every relevant document's cosine ≥ 2.3e-4 from any other document's for its
// query (min_relevant_score_gap), far above the ~1e-6 by which bertfit's fp32 embeddings differ
// from PyTorch's; the means then differ only by the roundings of a 20-term sum (~1e-15).
#include <gtest/gtest.h>

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

std::string evaluators() {
  return std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/st-evaluators";
}
std::string st_model() { return shared_dir() + "/golden/st-bert-mean-tiny/model"; }
json golden() {
  return json::parse(read_text(evaluators() + "/golden.json"))["information_retrieval"];
}

std::string retrieval_flags(const std::string& queries, const std::string& corpus,
                            const std::string& qrels) {
  return " --queries " + queries + " --corpus " + corpus + " --qrels " + qrels;
}
std::string fixture_flags() {
  return retrieval_flags(evaluators() + "/queries.jsonl", evaluators() + "/corpus.jsonl",
                         evaluators() + "/qrels.tsv");
}

// Every metric of the golden score function `fn` ("cos_sim", "dot_score") in `record` under
// bertfit's names (eval_cosine_ndcg@10, ...).
void expect_golden(const json& record, const std::string& fn, const std::string& prefix) {
  const json all = golden();
  const json& want = all[fn];
  int compared = 0;
  for (const char* metric : {"accuracy", "precision", "recall", "ndcg", "mrr", "map"}) {
    for (const auto& [k, value] : want[std::string(metric) + "@k"].items()) {
      const std::string key = "eval_" + prefix + metric + "@" + k;
      ASSERT_TRUE(record.contains(key)) << key << " missing from " << record.dump();
      EXPECT_NEAR(record[key].get<double>(), value.get<double>(), 1e-6) << key;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 15);
}

json eval_json(const std::string& args) {
  RunResult r = run_bertfit("eval --model " + st_model() + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(last_line(r.out)) : json::object();
}

std::vector<json> jsonl(const std::string& path) {
  std::vector<json> rows;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

void write_jsonl(const std::string& path, const std::vector<json>& rows) {
  std::string text;
  for (const json& row : rows) text += row.dump() + "\n";
  write_text(path, text);
}

TEST(RetrievalCli, EvalMatchesInformationRetrievalEvaluator) {
  const json out = eval_json(fixture_flags());
  expect_golden(out, "cos_sim", "cosine_");
  expect_golden(out, "dot_score", "dot_");
  EXPECT_EQ(out["examples"], 20);  // q20 has no relevant document: dropped
  EXPECT_EQ(out["queries"], 20);
  EXPECT_EQ(out["queries_dropped"], 1);
  EXPECT_EQ(out["corpus"], 60);
  EXPECT_FALSE(out.contains("eval_loss"));
  // 2.2.2's returned score (max over score functions of map@100) is among them.
  EXPECT_NEAR(out["eval_cosine_map@100"].get<double>(), golden()["returned"].get<double>(), 1e-6);
}

// A "title" is not embedded (the evaluator takes one text per document): the same numbers, and
// stderr says so. Integer _ids are their decimal text in the qrels.
TEST(RetrievalCli, TitlesAreNotEmbeddedAndIntegerIdsWork) {
  TempDir tmp;
  std::vector<json> corpus = jsonl(evaluators() + "/corpus.jsonl");
  for (json& doc : corpus) doc["title"] = "A title that would move every embedding";
  write_jsonl(tmp / "titled.jsonl", corpus);
  RunResult r = run_bertfit("eval --model " + st_model() +
                            retrieval_flags(evaluators() + "/queries.jsonl", tmp / "titled.jsonl",
                                            evaluators() + "/qrels.tsv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden(json::parse(last_line(r.out)), "cos_sim", "cosine_");
  EXPECT_NE(r.err.find("titled.jsonl: 60 of 60 lines have a \"title\", which is not embedded"),
            std::string::npos)
      << r.err;

  // Integer ids: query i -> 1000 + i, document j -> j, in the qrels as decimal text.
  std::vector<json> queries = jsonl(evaluators() + "/queries.jsonl");
  corpus = jsonl(evaluators() + "/corpus.jsonl");
  std::map<std::string, std::string> renamed;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    renamed[queries[i]["_id"]] = std::to_string(1000 + i);
    queries[i]["_id"] = 1000 + static_cast<int>(i);
  }
  for (std::size_t j = 0; j < corpus.size(); ++j) {
    renamed[corpus[j]["_id"]] = std::to_string(j);
    corpus[j]["_id"] = static_cast<int>(j);
  }
  std::string qrels;
  std::istringstream in(read_text(evaluators() + "/qrels.tsv"));
  std::string line;
  std::getline(in, line);
  qrels = line + "\n";
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string q, d, score;
    std::getline(fields, q, '\t');
    std::getline(fields, d, '\t');
    std::getline(fields, score);
    qrels += renamed.at(q) + "\t" + renamed.at(d) + "\t" + score + "\n";
  }
  write_jsonl(tmp / "q.jsonl", queries);
  write_jsonl(tmp / "c.jsonl", corpus);
  write_text(tmp / "qrels.tsv", qrels);
  expect_golden(eval_json(retrieval_flags(tmp / "q.jsonl", tmp / "c.jsonl", tmp / "qrels.tsv")),
                "cos_sim", "cosine_");
}

// A small set to break: two queries, three documents.
class RetrievalSmallSet : public ::testing::Test {
 protected:
  void SetUp() override {
    write_text(tmp_ / "q.jsonl",
               "{\"_id\": \"a\", \"text\": \"a cat\"}\n{\"_id\": \"b\", \"text\": \"a dog\"}\n");
    write_text(tmp_ / "c.jsonl",
               "{\"_id\": \"x\", \"text\": \"cats\"}\n{\"_id\": \"y\", \"text\": \"dogs\"}\n"
               "{\"_id\": \"z\", \"text\": \"fish\"}\n");
    write_text(tmp_ / "qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\t1\nb\ty\t1\n");
  }
  // `eval` with one of the three files replaced by `text`.
  RunResult eval_with(const std::string& which, const std::string& text) {
    write_text(tmp_ / ("bad-" + which), text);
    const std::string q = which == "q.jsonl" ? tmp_ / "bad-q.jsonl" : tmp_ / "q.jsonl";
    const std::string c = which == "c.jsonl" ? tmp_ / "bad-c.jsonl" : tmp_ / "c.jsonl";
    const std::string r = which == "qrels.tsv" ? tmp_ / "bad-qrels.tsv" : tmp_ / "qrels.tsv";
    return run_bertfit("eval --model " + st_model() + retrieval_flags(q, c, r));
  }
  TempDir tmp_;
};

// The error is one line, "bertfit: error: ..." holding `message` (info lines may come before).
void expect_one_line_error(const RunResult& r, const std::string& message) {
  EXPECT_NE(r.exit_code, 0) << message;
  std::istringstream in(r.err);
  int errors = 0;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("info: ", 0) == 0 || line.rfind("warning: ", 0) == 0) continue;
    ++errors;
    found |= line.rfind("bertfit: error: ", 0) == 0 && line.find(message) != std::string::npos;
  }
  EXPECT_TRUE(found) << message << "\n" << r.err;
  EXPECT_EQ(errors, 1) << "not one line:\n" << r.err;
}

TEST_F(RetrievalSmallSet, FilesNameTheLine) {
  const std::string good_q = read_text(tmp_ / "q.jsonl"), good_c = read_text(tmp_ / "c.jsonl");
  const struct {
    std::string file, text, message;
  } cases[] = {
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\t1\nnope\ty\t1\n",
       "bad-qrels.tsv:3: query-id 'nope' is not in --queries"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tw\t1\n",
       "bad-qrels.tsv:2: corpus-id 'w' is not in --corpus"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\t1\nb\ty\t1\na\tx\t0\n",
       "bad-qrels.tsv:4: a second judgement of query 'a' and document 'x' (first on line 2)"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\t1.5\n",
       "bad-qrels.tsv:2: the score '1.5' is not an integer"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\n",
       "bad-qrels.tsv:2: expected 3 tab-separated fields (query-id, corpus-id, score), got 2"},
      {"qrels.tsv", "a\tx\t1\n", "bad-qrels.tsv:1: the first line is a judgement"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\n", "no judgements (only a header, or empty)"},
      {"qrels.tsv", "query-id\tcorpus-id\tscore\na\tx\t0\n",
       "no judgement has a score above 0, so no query has a relevant document"},
      {"q.jsonl", good_q + "{\"_id\": \"a\", \"text\": \"again\"}\n",
       "bad-q.jsonl:3: duplicate _id 'a' (first on line 1)"},
      {"c.jsonl", good_c + "\n{\"_id\": \"y\", \"text\": \"again\"}\n",
       "bad-c.jsonl:5: duplicate _id 'y' (first on line 2)"},
      {"q.jsonl", "",
       "--queries " + (tmp_ / "bad-q.jsonl") + ": no queries (no line that is not blank)"},
      {"c.jsonl", "\n", "--corpus " + (tmp_ / "bad-c.jsonl") + ": no documents"},
      {"c.jsonl", good_c + "{\"_id\": \"w\"}\n", "bad-c.jsonl:4: no \"text\" key"},
      {"c.jsonl", "{\"_id\": \"x\", \"text\": 3}\n", "bad-c.jsonl:1: \"text\" holds a JSON number"},
      {"q.jsonl", "{\"text\": \"no id\"}\n", "bad-q.jsonl:1: no \"_id\" key"},
      {"q.jsonl", "{\"_id\": \"\", \"text\": \"t\"}\n", "bad-q.jsonl:1: an empty \"_id\""},
      {"q.jsonl", "{\"_id\": 1.5, \"text\": \"t\"}\n",
       "bad-q.jsonl:1: \"_id\" holds a JSON number; expected a string or an integer"},
      {"q.jsonl", "{\"_id\": \"a\", \"text\": \"t\"\n", "bad-q.jsonl:1: expected a JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    expect_one_line_error(eval_with(c.file, c.text), c.message);
  }
}

TEST_F(RetrievalSmallSet, FlagsNameTheFlag) {
  const std::string q = " --queries " + (tmp_ / "q.jsonl"), c = " --corpus " + (tmp_ / "c.jsonl"),
                    r = " --qrels " + (tmp_ / "qrels.tsv");
  const std::string model = " --model " + st_model();
  expect_one_line_error(run_bertfit("eval" + model + q + c), "--qrels is needed");
  expect_one_line_error(run_bertfit("eval" + model + q + r), "--corpus is needed");
  expect_one_line_error(run_bertfit("eval" + model + c + r), "--queries is needed");
  expect_one_line_error(
      run_bertfit("eval" + model + q + c + r + " --dev-file " + (tmp_ / "q.jsonl")),
      "--queries and --dev-file: give one evaluation set");
  expect_one_line_error(run_bertfit("eval" + model + q + c + " --qrels " + (tmp_ / "none.tsv")),
                        "none.tsv");
  expect_one_line_error(run_bertfit("eval" + model + q + c + r + " --task stsb --data " +
                                    shared_dir() + "/data/glue/STS-B"),
                        "--queries and --task: give one evaluation set");
  // A classifier has no embeddings to rank.
  init_tiny_model(tmp_ / "classifier");
  expect_one_line_error(run_bertfit("eval --model " + (tmp_ / "classifier") + q + c + r),
                        "the retrieval evaluation is for sentence embedders");
}

// As sentence-transformers' encode, eval cuts a sentence embedder's texts at the folder's
// max_seq_length (64 here) unless --max-seq-len says otherwise: a 100-token document is cut at
// 64 by default, and not at all under --max-seq-len 128.
TEST_F(RetrievalSmallSet, TextsAreCutAtTheFoldersMaxSeqLength) {
  std::string long_text;
  for (int i = 0; i < 49; ++i) long_text += "dog ";  // 49 words + [CLS] + [SEP]: 51 tokens at least
  long_text += long_text;
  write_text(tmp_ / "long.jsonl", read_text(tmp_ / "c.jsonl") +
                                      json{{"_id", "long"}, {"text", long_text}}.dump() + "\n");
  const std::string args =
      "eval --model " + st_model() +
      retrieval_flags(tmp_ / "q.jsonl", tmp_ / "long.jsonl", tmp_ / "qrels.tsv");
  RunResult cut = run_bertfit(args);
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_NE(cut.err.find("long.jsonl: 1 of 4 rows are longer than --max-seq-len 64 tokens"),
            std::string::npos)
      << cut.err;
  RunResult whole = run_bertfit(args + " --max-seq-len 128");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err.find("rows are longer"), std::string::npos) << whole.err;
}

// train of st-bert-mean-tiny on its 8 MRPC pairs, evaluated on the fixture's retrieval set.
class RetrievalTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    const json pairs =
        json::parse(read_text(shared_dir() + "/golden/st-bert-mean-tiny/pairs.json"));
    std::vector<json> rows;
    for (std::size_t i = 0; i < pairs["anchor"].size(); ++i) {
      rows.push_back({{"anchor", pairs["anchor"][i]}, {"positive", pairs["positive"][i]}});
    }
    write_jsonl(tmp_ / "pairs.jsonl", rows);
  }
  std::string train(const std::string& out, const std::string& extra) {
    return "train --model " + st_model() + " --output " + (tmp_ / out) + " --train-file " +
           (tmp_ / "pairs.jsonl") +
           " --text-a-column anchor --text-b-column positive --batch-size 4 --max-seq-len 64 " +
           extra;
  }
  // metrics.jsonl's evaluation records, and its final record.
  std::vector<json> evals(const std::string& out, json* final_rec) {
    std::vector<json> found;
    for (const json& rec : jsonl(tmp_ / out + "/metrics.jsonl")) {
      if (rec.contains("split")) found.push_back(rec);
      if (rec.value("final", false)) *final_rec = rec;
    }
    return found;
  }
  TempDir tmp_;
};

// With --lr 0 the model stays the evaluator's: every evaluation of the run is its numbers. Equal
// evaluations never beat the first, so the best is step 1's, by eval_cosine_ndcg@10.
TEST_F(RetrievalTrain, EvaluatesAtEveryEvalStepAndChoosesByNdcg) {
  RunResult r = run_bertfit(train("lr0", "--lr 0 --max-steps 2 --eval-every 1" + fixture_flags()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json final_rec;
  const std::vector<json> records = evals("lr0", &final_rec);
  ASSERT_EQ(records.size(), 2u);
  for (const json& rec : records) {
    expect_golden(rec, "cos_sim", "cosine_");
    expect_golden(rec, "dot_score", "dot_");
    EXPECT_EQ(rec["eval_examples"], 20);
    EXPECT_FALSE(rec.contains("eval_loss"));
  }
  EXPECT_EQ(final_rec["best_metric"], "eval_cosine_ndcg@10");
  EXPECT_EQ(final_rec["best_step"], 1);
  EXPECT_NEAR(final_rec["best_value"].get<double>(),
              golden()["cos_sim"]["ndcg@k"]["10"].get<double>(), 1e-6);
}

// Training moves the metrics; --load-best-model-at-end keeps the evaluation with the best
// eval_cosine_ndcg@10, whose numbers `eval` of the saved model gives again (same batches: the
// same embeddings bit for bit). --metric-for-best-model picks another of the metrics.
TEST_F(RetrievalTrain, BestModelIsTheBestEvaluationAndEvalAgrees) {
  RunResult r = run_bertfit(train(
      "best", "--lr 2e-3 --max-steps 6 --eval-every 2 --load-best-model-at-end" + fixture_flags()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json final_rec;
  const std::vector<json> records = evals("best", &final_rec);
  ASSERT_EQ(records.size(), 3u);
  double best = -1;
  std::int64_t best_step = 0;
  bool moved = false;
  for (const json& rec : records) {
    const double v = rec["eval_cosine_ndcg@10"].get<double>();
    if (v > best) best = v, best_step = rec["step"].get<std::int64_t>();
    moved |= std::fabs(rec["eval_cosine_map@100"].get<double>() -
                       golden()["cos_sim"]["map@k"]["100"].get<double>()) > 1e-6;
  }
  EXPECT_TRUE(moved) << "training did not change the retrieval metrics";
  EXPECT_EQ(final_rec["best_metric"], "eval_cosine_ndcg@10");
  EXPECT_EQ(final_rec["best_step"], best_step);
  EXPECT_DOUBLE_EQ(final_rec["best_value"].get<double>(), best);
  EXPECT_EQ(final_rec["model"], "best");
  const json again =
      json::parse(last_line(run_bertfit("eval --model " + (tmp_ / "best") + fixture_flags() +
                                        " --batch-size 4 --max-seq-len 64")
                                .out));
  EXPECT_NEAR(again["eval_cosine_ndcg@10"].get<double>(), best, 1e-6);

  RunResult map = run_bertfit(train(
      "map", "--lr 0 --max-steps 1 --metric-for-best-model cosine_map@100" + fixture_flags()));
  ASSERT_EQ(map.exit_code, 0) << map.err;
  evals("map", &final_rec);
  EXPECT_EQ(final_rec["best_metric"], "eval_cosine_map@100");
  EXPECT_NEAR(final_rec["best_value"].get<double>(), golden()["returned"].get<double>(), 1e-6);
}

TEST_F(RetrievalTrain, UserErrorsNameTheFlag) {
  const std::string q = " --queries " + evaluators() + "/queries.jsonl",
                    c = " --corpus " + evaluators() + "/corpus.jsonl",
                    rels = " --qrels " + evaluators() + "/qrels.tsv";
  expect_one_line_error(run_bertfit(train("e1", "--max-steps 1" + q + c)), "--qrels is needed");
  expect_one_line_error(
      run_bertfit(train("e2", "--max-steps 1 --dev-file " + (tmp_ / "pairs.jsonl") + q + c + rels)),
      "--queries and --dev-file: give one dev set");
  expect_one_line_error(
      run_bertfit(train(
          "e3", "--max-steps 1 --objective classification --label-column anchor" + q + c + rels)),
      "--queries: the retrieval evaluation is for sentence-embedding runs");
  expect_one_line_error(
      run_bertfit(
          train("e4", "--max-steps 1 --metric-for-best-model spearman_cosine" + q + c + rels)),
      "--metric-for-best-model spearman_cosine: the evaluation reports no such metric");
}

}  // namespace
}  // namespace bertfit::testing
