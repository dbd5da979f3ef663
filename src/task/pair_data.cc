// Sentence-embedding data (see pair_data.h).
#include "task/pair_data.h"

#include <cmath>

#include "base/error.h"
#include "base/log.h"
#include "data/table.h"
#include "task/similarity.h"

namespace bertfit {
namespace {

PairSet read_pairs(const DataOptions& d, const std::string& file,
                   const std::vector<std::string>& negative_columns, bool scored) {
  if (d.text_a_column.empty() || d.text_b_column.empty()) {
    throw_error(file,
                ": sentence-embedding rows need --text-a-column (the anchor or first "
                "text) and --text-b-column (the positive or second text)");
  }
  if (scored && d.label_column.empty()) {
    throw_error(file, ": the scored pairs need --label-column (the similarity score)");
  }
  std::vector<std::string> columns = {d.text_a_column, d.text_b_column};
  for (const std::string& c : negative_columns) {
    if (c.empty()) throw_error("--negative-columns: an empty column name");
    columns.push_back(c);
  }
  const int texts = static_cast<int>(columns.size());
  if (scored) columns.push_back(d.label_column);
  TableOptions options;
  options.header = !d.no_header;
  options.skip_malformed = d.skip_malformed;
  options.format = d.format;
  const ColumnTable table = read_columns(file, columns, options);
  warn_if_index_columns_with_header(table);
  require_rows(table);
  PairSet set{table.path, texts, {}, scored, table.skipped_rows};
  set.texts.reserve(table.rows.size() * texts);
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const std::vector<std::string>& row = table.rows[r];
    float score = 0;
    if (scored) {
      const std::optional<float> s = parse_float_label(row.back());
      if (!s || !std::isfinite(*s)) {
        throw_error(table.path, ":", table.lines[r], ": the score '", row.back(), "' (column ",
                    d.label_column, ") is not a finite number");
      }
      score = *s;
    }
    for (int c = 0; c < texts; ++c) {
      Example& e = set.texts.emplace_back();
      e.text_a = row[c];
      e.line = table.lines[r];
      if (c == 0 && scored) {
        e.label = score;
        e.has_label = true;
      }
    }
  }
  if (set.skipped_rows > 0) log_warn(set.path, ": skipped ", set.skipped_rows, " malformed rows");
  return set;
}

}  // namespace

PairSet load_pair_train(const DataOptions& d, const std::vector<std::string>& negative_columns,
                        bool scored) {
  if (!d.task.empty()) {
    throw_error("--task ", d.task,
                ": a sentence-embedding model trains on the rows of --train-file (with "
                "--text-a-column, --text-b-column and, for scored pairs, --label-column)");
  }
  if (d.train_file.empty()) throw_error("no training data: give --train-file");
  if (scored && !negative_columns.empty()) {
    throw_error(
        "--negative-columns: hard negatives are for MultipleNegativesRankingLoss "
        "(--loss mnrl), not for scored pairs");
  }
  return read_pairs(d, d.train_file, negative_columns, scored);
}

PairSet load_scored_pairs(const DataOptions& d, const std::string& file) {
  PairSet set = read_pairs(d, file, {}, /*scored=*/true);
  std::vector<Example> texts(set.texts.size());
  const std::int64_t n = set.samples();
  for (std::int64_t i = 0; i < n; ++i) {
    texts[i] = std::move(set.texts[2 * i]);
    texts[n + i] = std::move(set.texts[2 * i + 1]);
  }
  set.texts = std::move(texts);
  return set;
}

TaskInfo embedding_task_info() {
  TaskInfo task;
  task.name = "sentence-embedding";
  task.head = HeadKind::kEmbedding;
  task.problem = ProblemType::kRegression;
  task.metrics = similarity_metric_names();
  task.eval_splits = {"dev"};
  return task;
}

}  // namespace bertfit
