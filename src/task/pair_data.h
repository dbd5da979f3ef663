// Sentence-embedding data: rows of texts from custom TSV/CSV/JSONL files. Training rows are
// (anchor, positive, hard negatives...) for MultipleNegativesRankingLoss, or (text, text, score)
// for the scored losses; evaluation rows are scored pairs (STS-B's dev file), whose cosine
// similarities are ranked against the scores (task/similarity.h). The columns are the data
// group's --text-a-column (the anchor / first text), --text-b-column (the positive / second
// text) and --label-column (the score), with train's --negative-columns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example.h"
#include "flags/groups.h"
#include "task/dataset.h"

namespace bertfit {

struct PairSet {
  std::string path;
  int columns = 2;  // texts per sample
  // By sample: sample i's texts are [i·columns, (i+1)·columns), each as text_a; the first holds
  // the sample's score (label, has_label) when the set is scored, and every text its line.
  std::vector<Example> texts;
  bool scored = false;
  std::int64_t skipped_rows = 0;

  std::int64_t samples() const { return static_cast<std::int64_t>(texts.size()) / columns; }
};

// The training file's samples: --text-a-column, --text-b-column, then each of
// `negative_columns`, and the --label-column score when `scored`. Errors name the flag, or the
// file and line (a missing column, a score that is not a finite number, no rows); --task is
// refused (an embedding model trains on --train-file rows).
PairSet load_pair_train(const DataOptions& data, const std::vector<std::string>& negative_columns,
                        bool scored);

// The scored pairs of `file` (the dev file: --text-a-column, --text-b-column, --label-column) by
// column, as the similarity evaluation reads them (task/similarity.h): texts [0, n) the first
// of each pair (holding its score), [n, 2n) the second.
PairSet load_scored_pairs(const DataOptions& data, const std::string& file);

// The task of sentence-embedding training and evaluation: head kEmbedding, the similarity
// metrics.
TaskInfo embedding_task_info();

}  // namespace bertfit
