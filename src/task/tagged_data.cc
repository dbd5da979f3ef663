// Resolving tagged data for token classification (see tagged_data.h).
#include "task/tagged_data.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace bertfit {
namespace {

bool is_jsonl_name(const std::string& file) {
  return file.ends_with(".jsonl") || file.ends_with(".json");
}

std::string tokens_column(const DataOptions& d) {
  return d.tokens_column.empty() ? "tokens" : d.tokens_column;
}
std::string tags_column(const DataOptions& d) {
  return d.tags_column.empty() ? "tags" : d.tags_column;
}

// The first tag of `data` that is not in `names`: "FILE:LINE: tag 'X'", or "".
std::string first_unknown_tag(const LoadedTagged& data, const std::vector<std::string>& names) {
  for (const TaggedSentence& s : data.sentences) {
    for (std::size_t k = 0; k < s.tags.size(); ++k) {
      if (std::find(names.begin(), names.end(), s.tags[k]) == names.end()) {
        const std::int64_t line =
            data.one_word_per_line ? s.line + static_cast<std::int64_t>(k) : s.line;
        return cat(data.path, ":", line, ": tag '", s.tags[k], "'");
      }
    }
  }
  return "";
}

std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += cat(out.empty() ? "" : ", ", "'", n, "'");
  return out;
}

}  // namespace

bool is_tagged_data(const DataOptions& d, const std::string& file) {
  if (d.format == TableFormat::kConll || is_conll_path(file)) return true;
  if (!d.tokens_column.empty() || !d.tags_column.empty()) return true;
  const bool jsonl = d.format ? *d.format == TableFormat::kJsonl : is_jsonl_name(file);
  return jsonl && d.text_a_column.empty();
}

LoadedTagged read_tagged(const DataOptions& d, const std::string& file,
                         const std::vector<std::string>& id2label, bool with_tags) {
  LoadedTagged data;
  if (d.format == TableFormat::kConll || is_conll_path(file)) {
    data = read_conll(file, with_tags, d.skip_malformed);
  } else {
    const bool jsonl = d.format ? *d.format == TableFormat::kJsonl : is_jsonl_name(file);
    if (!jsonl) {
      throw_error(file, ": tagged data (--tokens-column, --tags-column) is read from CoNLL ",
                  "files (.conll, or --format conll) or JSONL (.jsonl, or --format jsonl)");
    }
    data = read_tagged_jsonl(file, tokens_column(d), with_tags ? tags_column(d) : "", id2label,
                             d.skip_malformed);
  }
  if (!data.skipped.empty()) {
    const SkippedRow& first = data.skipped.front();
    log_warn(data.path, ": skipped ", data.skipped.size(), " malformed sentence",
             data.skipped.size() == 1 ? "" : "s", " (--skip-malformed; the first at line ",
             first.line, ": ", first.reason, ")");
  }
  return data;
}

TrainData load_tagged_train_data(const DataOptions& d, const HeadOptions& h,
                                 const ModelConfig& model, std::optional<int> head_outputs,
                                 const std::string& model_dir) {
  if (!d.task.empty()) throw_error("--task names a GLUE task; tagged data needs --train-file");
  if (d.regression || h.num_labels > 0 ||
      (h.problem_type && *h.problem_type != ProblemType::kSingleLabel)) {
    throw_error(d.train_file, " holds tagged words (token classification): --regression, ",
                "--num-labels and --problem-type do not apply (the tags decide the labels)");
  }
  // Integer tags name the model's labels (a trained token classifier's id2label).
  const bool trained_head = head_outputs.has_value();
  TrainData out;
  out.tagged =
      read_tagged(d, d.train_file, trained_head ? model.id2label : std::vector<std::string>{});
  if (out.tagged.tag_names.empty()) throw_error(d.train_file, ": no tags to learn from");
  std::vector<std::string> names = out.tagged.tag_names;
  for (const std::string& item : h.labels) {
    if (&item == &h.labels.front()) names.clear();
    for (std::string& n : split_label_list(item)) names.push_back(std::move(n));
  }
  bool model_ids = false;
  if (h.labels.empty() && trained_head &&
      static_cast<int>(model.id2label.size()) == *head_outputs &&
      first_unknown_tag(out.tagged, model.id2label).empty()) {
    names = model.id2label;  // run_ner keeps a model's own label ids when they cover the data
    model_ids = true;
  }
  if (const std::string unknown = first_unknown_tag(out.tagged, names); !unknown.empty()) {
    throw_error(unknown, " is not among the tags ", quoted(names),
                h.labels.empty() ? "" : " that --labels names");
  }
  if (trained_head && !model_ids && static_cast<int>(names.size()) != *head_outputs) {
    if (!h.ignore_mismatched_sizes) {
      throw_error(model_dir, ": the model's token classifier has ", *head_outputs, " tags (",
                  quoted(model.id2label), ") but the data needs ", names.size(), " (",
                  quoted(names), "); give --ignore-mismatched-sizes to train a new classifier on ",
                  "the model's encoder, or --labels to name them");
    }
    out.new_head = true;
  }
  out.task = token_task_info(names);
  out.config = model;
  out.config.head = HeadKind::kTokenClassification;
  out.config.num_labels = static_cast<int>(names.size());
  out.config.id2label = names;
  out.config.problem_type = "";
  return out;
}

LoadedTagged load_eval_tagged(const DataOptions& d, const TaskInfo& task) {
  if (d.dev_file.empty()) throw_error("no evaluation data: give --dev-file");
  LoadedTagged data = read_tagged(d, d.dev_file, task.label_names);
  if (const std::string unknown = first_unknown_tag(data, task.label_names); !unknown.empty()) {
    throw_error(unknown, " is not one of the model's tags ", quoted(task.label_names));
  }
  return data;
}

void report_word_truncation(const std::string& source, const std::vector<EncodedExample>& encoded,
                            int max_seq_len) {
  std::int64_t rows = 0, words = 0;
  for (const EncodedExample& e : encoded) {
    rows += e.truncated_words > 0;
    words += e.truncated_words;
  }
  if (rows == 0) return;
  log_warn(source, ": ", rows, " of ", encoded.size(), " sentences are longer than --max-seq-len ",
           max_seq_len, " tokens; ", words, " word", words == 1 ? " was" : "s were",
           " cut (their tags are not learned or scored)");
}

void drop_unlabelled(const std::string& source, std::vector<EncodedExample>& encoded) {
  const auto unlabelled = [](const EncodedExample& e) {
    return std::none_of(e.token_labels.begin(), e.token_labels.end(),
                        [](std::int32_t l) { return l >= 0; });
  };
  const auto n = std::count_if(encoded.begin(), encoded.end(), unlabelled);
  if (n == 0) return;
  encoded.erase(std::remove_if(encoded.begin(), encoded.end(), unlabelled), encoded.end());
  log_warn(source, ": skipped ", n, " sentence", n == 1 ? "" : "s",
           " without a tagged word (nothing to learn from)");
  if (encoded.empty()) throw_error(source, ": no sentence with a tagged word to learn from");
}

}  // namespace bertfit
