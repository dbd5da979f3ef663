// A retrieval evaluation set as BEIR lays one out, read for task/retrieval.h:
//   --queries  JSONL, one {"_id": ID, "text": TEXT} per line (queries.jsonl)
//   --corpus   JSONL, one {"_id": ID, "text": TEXT} per line (corpus.jsonl); a "title" is not
//              embedded: InformationRetrievalEvaluator takes one text per document, and joining
//              BEIR's title to its text is the caller's choice (write it into "text")
//   --qrels    TSV with a header line (query-id, corpus-id, score), one judgement per line
//              (qrels/test.tsv); a score above 0 makes the document relevant to the query, 0 or
//              less says it is not (BEIR's pytrec_eval reading)
// An ID is a JSON string or integer. The queries without a relevant document are dropped (not
// embedded), as the evaluator drops them. Errors name the flag, or the file and line: a missing
// or duplicate ID, an ID of the qrels absent from the queries or the corpus, a duplicate
// judgement, an empty file, a malformed line, no query with a relevant document.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/example.h"
#include "flags/groups.h"
#include "task/dataset.h"
#include "task/retrieval.h"
#include "tokenizer/tokenizer.h"

namespace bertfit {

struct RetrievalSet {
  // The queries with a relevant document, in file order, then every document, in file order;
  // each as text_a with its line.
  std::vector<Example> queries, corpus;
  std::vector<std::string> query_ids, corpus_ids;  // of `queries` and `corpus`
  std::string queries_path, corpus_path;
  std::shared_ptr<const RetrievalJudgements> judgements;
  std::int64_t dropped_queries = 0;  // without a relevant document
};

// Whether any of --queries, --corpus, --qrels is given (a retrieval dev set is asked for).
bool wants_retrieval(const DataOptions& data);

// Error naming the missing flag unless --queries, --corpus and --qrels are all given.
void require_retrieval_flags(const DataOptions& data);

// Reads --queries, --corpus and --qrels (all three needed: require_retrieval_flags).
RetrievalSet load_retrieval_set(const DataOptions& data);

// The queries then the documents, encoded as the evaluation takes them (task/evaluate.h), each
// file's truncation reported on stderr.
std::vector<EncodedExample> encode_retrieval_set(const Tokenizer& tokenizer,
                                                 const RetrievalSet& set, int max_seq_len);

// The task of a sentence embedder evaluated on a retrieval set: embedding_task_info with the
// retrieval metrics (task/retrieval.h), whose first, cosine_ndcg@10, is the main one.
TaskInfo retrieval_task_info(std::shared_ptr<const RetrievalJudgements> judgements);

}  // namespace bertfit
