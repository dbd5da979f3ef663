// Reading a BEIR-style retrieval set (see retrieval_data.h).
#include "task/retrieval_data.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "data/table.h"
#include "task/pair_data.h"

namespace bertfit {
namespace {

// The texts of a queries or corpus file, by ID.
struct TextFile {
  std::vector<Example> texts;  // text_a, line
  std::vector<std::string> ids;
  std::unordered_map<std::string, std::int64_t> index;  // id -> position
};

// An "_id" as text: a string, or an integer as written.
std::string id_of(const nlohmann::json& object, const std::string& path, std::int64_t line) {
  const auto it = object.find("_id");
  if (it == object.end()) throw_error(path, ":", line, ": no \"_id\" key");
  if (it->is_string()) {
    if (it->get<std::string>().empty()) throw_error(path, ":", line, ": an empty \"_id\"");
    return it->get<std::string>();
  }
  if (it->is_number_integer()) return it->dump();
  throw_error(path, ":", line, ": \"_id\" holds a JSON ", it->type_name(),
              "; expected a string or an integer");
}

// One {"_id", "text"} object per non-blank line. `what`: "queries" or "documents".
TextFile read_texts(const std::string& path, const char* flag, const char* what) {
  const std::string content = read_file(path);
  TextFile file;
  std::int64_t titled = 0;
  for_each_line(strip_bom(content), [&](std::int64_t line, std::string_view text) {
    if (text.find_first_not_of(" \t") == std::string_view::npos) return;
    const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!object.is_object()) {
      throw_error(path, ":", line,
                  ": expected a JSON object with \"_id\" and \"text\" (invalid JSON or UTF-8, or "
                  "not an object)");
    }
    std::string id = id_of(object, path, line);
    const auto t = object.find("text");
    if (t == object.end()) throw_error(path, ":", line, ": no \"text\" key");
    if (!t->is_string()) {
      throw_error(path, ":", line, ": \"text\" holds a JSON ", t->type_name(),
                  "; expected a string");
    }
    const auto [at, fresh] = file.index.emplace(id, static_cast<std::int64_t>(file.ids.size()));
    if (!fresh) {
      throw_error(path, ":", line, ": duplicate _id '", id, "' (first on line ",
                  file.texts[at->second].line, ")");
    }
    const auto title = object.find("title");
    if (title != object.end() && title->is_string() && !title->get<std::string>().empty()) ++titled;
    Example& e = file.texts.emplace_back();
    e.text_a = t->get<std::string>();
    e.line = line;
    file.ids.push_back(std::move(id));
  });
  if (file.texts.empty())
    throw_error(flag, " ", path, ": no ", what, " (no line that is not blank)");
  if (titled > 0) {
    log_warn(path, ": ", titled, " of ", file.texts.size(),
             " lines have a \"title\", which is not embedded: only \"text\" is, as "
             "InformationRetrievalEvaluator takes one text per document (write the title into "
             "\"text\" to embed it)");
  }
  return file;
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> fields;
  for (std::size_t at = 0;;) {
    const std::size_t tab = line.find('\t', at);
    fields.push_back(
        line.substr(at, tab == std::string_view::npos ? std::string_view::npos : tab - at));
    if (tab == std::string_view::npos) return fields;
    at = tab + 1;
  }
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Per query of `queries`: its relevant documents' positions in `corpus` (sorted).
std::vector<std::vector<std::int64_t>> read_qrels(const std::string& path, const TextFile& queries,
                                                  const TextFile& corpus, const DataOptions& d) {
  const std::string content = read_file(path);
  std::vector<std::vector<std::int64_t>> relevant(queries.ids.size());
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> judged;  // -> line
  bool header = true;
  for_each_line(strip_bom(content), [&](std::int64_t line, std::string_view text) {
    if (text.find_first_not_of(" \t") == std::string_view::npos) return;
    const std::vector<std::string_view> f = split_tabs(text);
    if (f.size() != 3) {
      throw_error(path, ":", line,
                  ": expected 3 tab-separated fields (query-id, corpus-id, score), got ", f.size());
    }
    if (std::exchange(header, false)) {
      if (parse_int(f[2])) {
        throw_error(path, ":", line,
                    ": the first line is a judgement; a qrels file starts with a header line "
                    "(query-id, corpus-id, score), as BEIR's do");
      }
      return;
    }
    const std::optional<std::int64_t> score = parse_int(f[2]);
    if (!score) throw_error(path, ":", line, ": the score '", f[2], "' is not an integer");
    const auto q = queries.index.find(std::string(f[0]));
    if (q == queries.index.end()) {
      throw_error(path, ":", line, ": query-id '", f[0], "' is not in --queries ", d.queries_file);
    }
    const auto c = corpus.index.find(std::string(f[1]));
    if (c == corpus.index.end()) {
      throw_error(path, ":", line, ": corpus-id '", f[1], "' is not in --corpus ", d.corpus_file);
    }
    const auto [at, fresh] = judged.emplace(std::pair(q->second, c->second), line);
    if (!fresh) {
      throw_error(path, ":", line, ": a second judgement of query '", f[0], "' and document '",
                  f[1], "' (first on line ", at->second, ")");
    }
    if (*score > 0) relevant[q->second].push_back(c->second);
  });
  if (judged.empty()) throw_error("--qrels ", path, ": no judgements (only a header, or empty)");
  for (auto& r : relevant) std::sort(r.begin(), r.end());
  return relevant;
}

}  // namespace

bool wants_retrieval(const DataOptions& d) {
  return !d.queries_file.empty() || !d.corpus_file.empty() || !d.qrels_file.empty();
}

void require_retrieval_flags(const DataOptions& d) {
  for (const auto& [flag, value] : {std::pair{"--queries", &d.queries_file},
                                    {"--corpus", &d.corpus_file},
                                    {"--qrels", &d.qrels_file}}) {
    if (value->empty()) {
      throw_error(flag,
                  " is needed: the retrieval evaluation reads --queries, --corpus and --qrels");
    }
  }
}

RetrievalSet load_retrieval_set(const DataOptions& d) {
  require_retrieval_flags(d);
  TextFile queries = read_texts(d.queries_file, "--queries", "queries");
  TextFile corpus = read_texts(d.corpus_file, "--corpus", "documents");
  std::vector<std::vector<std::int64_t>> relevant = read_qrels(d.qrels_file, queries, corpus, d);
  RetrievalSet set;
  auto judgements = std::make_shared<RetrievalJudgements>();
  for (std::size_t q = 0; q < relevant.size(); ++q) {
    if (relevant[q].empty()) {
      ++set.dropped_queries;
      continue;
    }
    set.queries.push_back(std::move(queries.texts[q]));
    set.query_ids.push_back(std::move(queries.ids[q]));
    judgements->relevant.push_back(std::move(relevant[q]));
  }
  if (set.queries.empty()) {
    throw_error("--qrels ", d.qrels_file,
                ": no judgement has a score above 0, so no query has a relevant document");
  }
  set.queries_path = d.queries_file;
  set.corpus_path = d.corpus_file;
  set.corpus = std::move(corpus.texts);
  set.corpus_ids = std::move(corpus.ids);
  judgements->queries = static_cast<std::int64_t>(set.queries.size());
  judgements->corpus = static_cast<std::int64_t>(set.corpus.size());
  set.judgements = std::move(judgements);
  if (set.dropped_queries > 0) {
    log_info(
        d.queries_file, ": ", set.dropped_queries, " of ",
        set.dropped_queries + set.judgements->queries,
        " queries have no relevant document and are left out (as InformationRetrievalEvaluator "
        "does)");
  }
  return set;
}

std::vector<EncodedExample> encode_retrieval_set(const Tokenizer& tokenizer,
                                                 const RetrievalSet& set, int max_seq_len) {
  std::vector<EncodedExample> texts = encode_examples(tokenizer, set.queries, max_seq_len);
  report_truncation(set.queries_path, texts, max_seq_len);
  std::vector<EncodedExample> docs = encode_examples(tokenizer, set.corpus, max_seq_len);
  report_truncation(set.corpus_path, docs, max_seq_len);
  texts.insert(texts.end(), std::make_move_iterator(docs.begin()),
               std::make_move_iterator(docs.end()));
  return texts;
}

TaskInfo retrieval_task_info(std::shared_ptr<const RetrievalJudgements> judgements) {
  TaskInfo task = embedding_task_info();
  task.metrics = retrieval_metric_names();
  task.retrieval = std::move(judgements);
  return task;
}

}  // namespace bertfit
