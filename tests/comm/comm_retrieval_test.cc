// Retrieval evaluation during data-parallel training: each rank embeds its contiguous slice of
// the queries and the corpus, the slices are gathered, and every rank ranks the whole set. On
// 2 and 3 ranks (81 texts: slices of 41/40 and 27 each, so a slice boundary falls inside the
// queries or between queries and corpus) the evaluation records of metrics.jsonl must be
// sentence-transformers' InformationRetrievalEvaluator numbers for the unchanged model (--lr 0),
// as one process gives them (tests/cli/retrieval_cli_test.cc; tolerance argued there).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../cli/cli_util.h"
#include "mpi_run.h"

namespace bertfit::testing {
namespace {

using nlohmann::json;

TEST(DistRetrieval, RanksGatherTheEmbeddingsAndAgreeWithTheEvaluator) {
  TempDir tmp;
  const std::string st = shared_dir() + "/golden/st-bert-mean-tiny";
  const std::string fixture = std::string(BERTFIT_SOURCE_DIR) + "/tests/fixtures/st/st-evaluators";
  const json golden = json::parse(read_text(fixture + "/golden.json"))["information_retrieval"];
  const json pairs = json::parse(read_text(st + "/pairs.json"));
  std::string rows;
  for (std::size_t i = 0; i < pairs["anchor"].size(); ++i) {
    rows += json{{"anchor", pairs["anchor"][i]}, {"positive", pairs["positive"][i]}}.dump() + "\n";
  }
  write_text(tmp / "pairs.jsonl", rows);
  for (int np : {2, 3}) {
    SCOPED_TRACE(np);
    const std::string out = tmp / ("np" + std::to_string(np));
    RunResult r = run_mpi(
        np, "train --model " + st + "/model --output " + out + " --train-file " +
                (tmp / "pairs.jsonl") +
                " --text-a-column anchor --text-b-column positive --batch-size 2 --max-seq-len 64"
                " --lr 0 --max-steps 1 --queries " +
                fixture + "/queries.jsonl --corpus " + fixture + "/corpus.jsonl --qrels " +
                fixture + "/qrels.tsv");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("of " + std::to_string(np)), std::string::npos) << r.err;
    json eval;
    std::istringstream in(read_text(out + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json rec = json::parse(line);
      if (rec.contains("split")) eval = rec;
    }
    ASSERT_TRUE(eval.is_object()) << read_text(out + "/metrics.jsonl");
    EXPECT_EQ(eval["eval_examples"], 20);
    int compared = 0;
    for (const auto& [fn, prefix] : {std::pair{"cos_sim", "cosine_"}, {"dot_score", "dot_"}}) {
      for (const char* metric : {"accuracy", "precision", "recall", "ndcg", "mrr", "map"}) {
        for (const auto& [k, value] : golden[fn][std::string(metric) + "@k"].items()) {
          const std::string key = std::string("eval_") + prefix + metric + "@" + k;
          ASSERT_TRUE(eval.contains(key)) << key;
          EXPECT_NEAR(eval[key].get<double>(), value.get<double>(), 1e-6) << key;
          ++compared;
        }
      }
    }
    EXPECT_EQ(compared, 30);
  }
}

}  // namespace
}  // namespace bertfit::testing
