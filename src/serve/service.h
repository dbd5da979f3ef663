// The routes of `bertfit serve`, free of any HTTP library: an HttpRequest in, an HttpResponse out
// through a callback (at once, or from the compute worker's completion, posted back to the
// connection threads). TEI 1.9's routes and errors, all listed in one table (route_table()),
// which the server dispatches on and from which GET /api-doc/openapi.json (OpenAPI 3) and the
// GET /docs page are generated:
//   POST /predict                              classify (protocol.h for the body): a sequence
//                                              classifier answers its labels' scores per input
//                                              (TEI's answer); a token classifier the entities
//                                              of each text (the Hub's token-classification
//                                              answer: entity_group, score, word, start, end in
//                                              characters), grouped by the request's
//                                              aggregation_strategy (default simple)
//   POST /, POST /invocations                  the model's own route, as TEI routes them: /embed
//                                              for an embedding model, /rerank for a one-output
//                                              sequence classifier (a reranker), /predict for
//                                              any other classifier
//   POST /embed                                an embedding model's vector per input (TEI's
//                                              /embed: normalize, truncate, prompt_name,
//                                              dimensions); inputs may be token ids
//   POST /embed_all                            an embedding model's last layer at every token
//                                              of each input ([CLS] and [SEP] too; no pooling,
//                                              no normalization): TEI's /embed_all (truncate,
//                                              prompt_name); inputs may be token ids
//   POST /embed_sparse                         TEI's SPLADE route: bertfit serves no SPLADE
//                                              model, so always TEI's 424 for a dense one
//   POST /similarity                           the cosine similarity of /embed's vector of
//                                              inputs.source_sentence with each of
//                                              inputs.sentences (TEI's /similarity)
//   POST /v1/embeddings, POST /embeddings      the same in OpenAI's form (input: texts or token
//                                              ids, encoding_format float or base64,
//                                              dimensions); `model` answers served_model_name
//   POST /rerank                               a cross-encoder's (a one-output sequence
//                                              classifier's) score of (query, text) per text,
//                                              sigmoid unless raw_scores, sorted, with index
//   POST /tokenize                             the model's tokens per input
//   POST /decode                               the text of each id list (Tokenizer::decode;
//                                              skip_special_tokens, default true)
//   GET  /health, GET /, GET /ping             200 while the compute worker runs and its last
//                                              batch did not fail; answered at once, never
//                                              queued behind inference
//   GET  /info                                 TEI's Info (model_type classifier, reranker or
//                                              embedding; served_model_name) and bertfit's
//                                              additions: weights sha256, task, the routes the
//                                              model serves
//   GET  /metrics                              Prometheus text (metrics.h): bertfit_* and TEI's
//                                              te_* names
//   GET  /api-doc/openapi.json, GET /docs      the OpenAPI 3 document of route_table() and an
//                                              HTML page of it
// With an API key, every route but the health routes (GET /health, /, /ping), /metrics and the
// two API documents needs `Authorization: Bearer KEY` (the
// scheme in any case); a 401 says `WWW-Authenticate: Bearer`; a request with two Authorization
// headers is refused (400) on every route. HEAD is answered on the GET routes (RFC 9110 §9.3.2:
// GET's status and headers; the connection sends no body).
// A model route the model cannot serve (/predict on an embedder, /embed, /embed_all,
// /similarity, /v1/embeddings on a classifier, /rerank on anything but a cross-encoder) is TEI's
// 424 ("backend": "Backend error: Model is not an embedding model", ...), naming the model's
// head and task.
// Bounded work: every route but /health, /info and /metrics holds one of
// max_concurrent_requests places (429 past it); /tokenize and /decode answer at most
// max_batch_tokens tokens a request (413 past it); the model routes are admitted by the real
// tokens already queued (429 past BatchLimits::max_queued_tokens), batched together by the
// Batcher, and answered 503 with Retry-After when they waited in the queue over
// max_queue_seconds. Answers are bounded by max_answer_bytes (413). Every refusal is counted in
// /metrics by reason and status.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/protocol.h"
#include "task/entities.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::serve {

// What a route does; RouteKind::kModel is POST / and /invocations, resolved by the model.
enum class RouteKind {
  kPredict,
  kModel,
  kEmbed,
  kEmbedAll,
  kEmbedSparse,
  kSimilarity,
  kOpenAiEmbed,
  kRerank,
  kTokenize,
  kDecode,
  kHealth,
  kInfo,
  kMetrics,
  kOpenApi,
  kDocs,
};

// One row of the route table: method and path, what it does, whether it needs the API key,
// the OpenAPI summary and the name of its request body's schema ("" for none).
struct Route {
  const char* method;  // "GET" (HEAD too) or "POST"
  const char* path;
  RouteKind kind;
  bool needs_key;
  const char* summary;
  const char* request_schema;
};

// Every route the server answers (what Service::handle dispatches on). Any other path is a 404,
// any other method on a listed path a 405.
const std::vector<Route>& route_table();

// The OpenAPI 3.0 document of route_table() (GET /api-doc/openapi.json), for a server of the
// given version.
std::string openapi_document(const std::string& version);

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", ...
  std::string target;  // path and query, as sent
  std::string authorization;
  int authorization_headers = 0;  // how many Authorization lines it had (two or more: 400)
  std::string body;
  Clock::time_point start = Clock::now();  // when its header arrived
  // Set by the connection when the client closes it before its answer: the queue then drops
  // its inputs not yet computed and its answer is not formatted. Null: never.
  std::shared_ptr<const std::atomic<bool>> client_gone;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// Called exactly once per request, from any thread.
using Respond = std::function<void(HttpResponse)>;
// Runs a closure on the connection threads.
using Post = std::function<void(std::function<void()>)>;

HttpResponse error_response(int status, const std::string& type, const std::string& message);

struct ServiceOptions {
  int max_client_batch_size = 32;
  int max_concurrent_requests = 512;
  bool auto_truncate = false;
  std::string api_key;  // empty: no authorization
  BatchLimits limits;
  // The largest answer body (--max-answer-bytes): a request whose answer would be larger gets
  // 413 naming the flag, before any work where the size is known in advance (/embed_all: its
  // token rows), else once formatted.
  std::size_t max_answer_bytes = std::size_t{32} << 20;
  int tokenization_workers = 1;
  // An embedding model's max_seq_length (sentence_bert_config.json), as TEI takes it: inputs are
  // cut there (truncate) or refused past it, and /info reports it; 0: the model's positions.
  int max_seq_length = 0;
  // An embedding model's prompts (config_sentence_transformers.json) and the default one.
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
};

// What GET /info reports beyond the limits.
struct ServeInfo {
  std::string model_id;        // the model folder as given
  std::string weights_file;    // the weights file's name
  std::string weights_sha256;  // of that file
  std::string dtype;           // "float32", "bfloat16", "int8"
  std::string version;         // bertfit's
  // TEI's served_model_name (--served-model-name): what /info and the OpenAI route's `model`
  // say; empty: model_id.
  std::string served_model_name;
};

class Service {
 public:
  Service(const ModelConfig& config, const Tokenizer& tokenizer, Batcher& batcher, Metrics& metrics,
          ServiceOptions options, ServeInfo info);

  // Where completions are formatted and answered (default: inline, on the compute worker).
  void set_post(Post post) { post_ = std::move(post); }

  // Answers req through respond, once. Never throws.
  void handle(HttpRequest req, Respond respond);

  Metrics& metrics() { return metrics_; }

  int max_input_length() const {
    const int positions = config_.max_tokens();
    return options_.max_seq_length > 0 ? std::min(options_.max_seq_length, positions) : positions;
  }
  // What GET /info says: the pipeline task and the routes this model serves.
  const char* task() const;
  std::vector<std::string> routes() const;
  const std::string& served_model_name() const {
    return info_.served_model_name.empty() ? info_.model_id : info_.served_model_name;
  }

 private:
  void predict(const HttpRequest& req, Respond respond);
  void embed(const HttpRequest& req, Respond respond);
  void openai_embed(const HttpRequest& req, Respond respond);
  void rerank(const HttpRequest& req, Respond respond);
  void embed_all(const HttpRequest& req, Respond respond);
  void similarity(const HttpRequest& req, Respond respond);
  // The route POST / and /invocations mean for this model (TEI's routing by model type).
  RouteKind model_route() const;
  // Whether the model answers routes of this kind (else TEI's 424).
  bool serves(RouteKind kind) const;
  HttpResponse docs_page() const;
  // One of max_concurrent_requests places, held until the answer is sent (ApiError 429 if none).
  std::shared_ptr<void> take_place();
  // A one-output sequence classifier (what /rerank scores with).
  bool cross_encoder() const;
  // Throws TEI's 424 for a route the model cannot serve: "Backend error: <tei_message>", then
  // the model's head and task and what the route needs.
  [[noreturn]] void refuse(const std::string& route, const char* tei_message,
                           const char* needs) const;
  // refuse()s unless the model is an embedding model.
  void require_embedder(const char* route) const;
  // The text of a prompt_name (else the default prompt; "" for none); 422 for a name the model
  // does not have.
  std::string prompt_of(const std::optional<std::string>& prompt_name) const;
  // The body of an embedding answer from the vectors and the inputs' token count.
  using EmbedAnswer = std::function<std::string(std::vector<std::vector<float>>, std::int64_t)>;
  // With a prompt, an input of token ids becomes the prompt and the ids' text (decoded without
  // special tokens), as TEI does; a text gets the prompt before it.
  TextInput with_prompt(TextInput input, const std::string& prompt) const;
  // Embeds prompt + each input; each vector cut to `dimensions` and normalized when asked.
  void embed_texts(const HttpRequest& req, Respond respond, std::vector<TextInput> texts,
                   const std::string& prompt, bool normalize, std::optional<int> dimensions,
                   std::optional<bool> truncate, TruncationDirection direction, EmbedAnswer answer);
  // An upper bound of an answer's bytes from the encoded inputs (0: not known in advance).
  using AnswerBound = std::function<std::size_t(const std::vector<Encoding>&)>;
  // Encodes the inputs, queues them as one Job of `output` and answers with format(done) when it
  // is computed (or the timeout, failure and overload answers); place is held until then. The
  // answer is formatted on the compute worker (never for a client that has gone) and refused
  // with 413 past max_answer_bytes: before queueing when bound says so, else once formatted.
  // first_tokens: every input's first text already tokenized (/rerank's query, done once).
  void submit(const HttpRequest& req, std::shared_ptr<void> place,
              const std::vector<TextInput>& inputs, bool truncate, TruncationDirection direction,
              bool with_offsets, Output output, Respond respond,
              std::function<std::string(const Job&)> format, const AnswerBound& bound = {},
              const std::vector<std::int32_t>* first_tokens = nullptr);
  // The 413 of an answer of `bytes` over max_answer_bytes.
  ApiError answer_too_large(std::size_t bytes) const;
  HttpResponse tokenize(const HttpRequest& req);
  HttpResponse decode(const HttpRequest& req);
  HttpResponse health() const;
  HttpResponse info() const;
  bool authorized(const HttpRequest& req) const;
  // The JSON answer to one input: [{"label", "score"}, ...] by descending score.
  void append_predictions(std::string& out, const float* logits, bool raw_scores) const;
  // A token classifier's answer to one input: its entities (task/tagging.h).
  void append_entities(std::string& out, std::string text, const Encoding& input,
                       const float* logits, Aggregation how) const;

  const ModelConfig& config_;
  const bool tagger_;    // a token classifier
  const bool embedder_;  // an embedding model
  const Tokenizer& tokenizer_;
  Batcher& batcher_;
  Metrics& metrics_;
  ServiceOptions options_;
  ServeInfo info_;
  Post post_;
  std::atomic<int> in_flight_{0};
};

}  // namespace bertfit::serve
