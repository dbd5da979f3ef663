// The routes of bertfit serve (see service.h): dispatch, authorization, the classifiers' routes,
// the queue submission every model route shares, /health and /info. The embedding routes are in
// service_embed.cc, /tokenize and /decode in service_tokens.cc.
#include "serve/service.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "model/head.h"
#include "task/tagging.h"

namespace bertfit::serve {
namespace {

using nlohmann::json;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// TEI's unit for the timing headers: whole milliseconds.
std::string millis(double seconds) {
  return std::to_string(static_cast<long long>(seconds * 1000.0));
}

// The path of a target without its query.
std::string path_of(const std::string& target) { return target.substr(0, target.find('?')); }

// Holds one of --max-concurrent-requests' places until the answer is sent.
class InFlight {
 public:
  InFlight(std::atomic<int>& count, Metrics& metrics)
      : count_(count), metrics_(metrics), value_(++count_) {
    metrics_.set_in_flight(value_);
  }
  // The count with this request.
  int value() const { return value_; }
  ~InFlight() { metrics_.set_in_flight(--count_); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& count_;
  Metrics& metrics_;
  int value_;
};

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

HttpResponse error_response(int status, const std::string& type, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = error_body(type, message);
  return r;
}

Service::Service(const ModelConfig& config, const Tokenizer& tokenizer, Batcher& batcher,
                 Metrics& metrics, ServiceOptions options, ServeInfo info)
    : config_(config),
      tagger_(config.head == HeadKind::kTokenClassification),
      embedder_(config.head == HeadKind::kEmbedding),
      tokenizer_(tokenizer),
      batcher_(batcher),
      metrics_(metrics),
      options_(std::move(options)),
      info_(std::move(info)),
      post_([](std::function<void()> f) { f(); }) {}

// `Bearer KEY` (RFC 6750 §2.1), the scheme in any case (RFC 9110 §11.1).
bool Service::authorized(const HttpRequest& req) const {
  if (options_.api_key.empty()) return true;
  constexpr std::string_view kScheme = "bearer";
  const std::string_view header = req.authorization;
  const bool scheme =
      header.size() > kScheme.size() && header[kScheme.size()] == ' ' &&
      std::equal(kScheme.begin(), kScheme.end(), header.begin(),
                 [](char k, char c) { return k == std::tolower(static_cast<unsigned char>(c)); });
  std::string_view key = scheme ? header.substr(kScheme.size()) : std::string_view();
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  return equal_constant_time(std::string(key), options_.api_key) && scheme;
}

const std::vector<Route>& route_table() {
  static const std::vector<Route> table = {
      {"POST", "/predict", RouteKind::kPredict, true,
       "A sequence classifier's label scores per input, or a token classifier's entities",
       "PredictRequest"},
      {"POST", "/", RouteKind::kModel, true,
       "The model's route: /embed for an embedding model, /rerank for a one-output classifier "
       "(a reranker), /predict for any other classifier",
       "ModelRequest"},
      {"POST", "/invocations", RouteKind::kModel, true, "As POST /", "ModelRequest"},
      {"POST", "/embed", RouteKind::kEmbed, true, "An embedding model's vector per input",
       "EmbedRequest"},
      {"POST", "/embed_all", RouteKind::kEmbedAll, true,
       "An embedding model's last-layer vector at every token of each input", "EmbedAllRequest"},
      {"POST", "/embed_sparse", RouteKind::kEmbedSparse, true,
       "Sparse (SPLADE) embeddings: 424 for a dense model (bertfit serves no SPLADE model)",
       "EmbedAllRequest"},
      {"POST", "/similarity", RouteKind::kSimilarity, true,
       "Cosine similarity of a source sentence's embedding with each sentence's",
       "SimilarityRequest"},
      {"POST", "/v1/embeddings", RouteKind::kOpenAiEmbed, true,
       "OpenAI's embeddings route (float or base64)", "OpenAiEmbedRequest"},
      {"POST", "/embeddings", RouteKind::kOpenAiEmbed, true, "As POST /v1/embeddings",
       "OpenAiEmbedRequest"},
      {"POST", "/rerank", RouteKind::kRerank, true,
       "A one-output classifier's score of (query, text) per text, best first", "RerankRequest"},
      {"POST", "/tokenize", RouteKind::kTokenize, true, "The model's tokens per input",
       "TokenizeRequest"},
      {"POST", "/decode", RouteKind::kDecode, true, "The text of each list of token ids",
       "DecodeRequest"},
      {"GET", "/health", RouteKind::kHealth, false,
       "200 while the model's worker runs and its last batch did not fail", ""},
      {"GET", "/", RouteKind::kHealth, false, "As GET /health", ""},
      {"GET", "/ping", RouteKind::kHealth, false, "As GET /health", ""},
      {"GET", "/info", RouteKind::kInfo, true, "The model, its task and routes, and the limits",
       ""},
      {"GET", "/metrics", RouteKind::kMetrics, false, "Prometheus metrics (bertfit_* and te_*)",
       ""},
      {"GET", "/api-doc/openapi.json", RouteKind::kOpenApi, false, "This OpenAPI 3 document", ""},
      {"GET", "/docs", RouteKind::kDocs, false, "An HTML page of the OpenAPI document", ""},
  };
  return table;
}

RouteKind Service::model_route() const {
  if (embedder_) return RouteKind::kEmbed;
  return cross_encoder() ? RouteKind::kRerank : RouteKind::kPredict;
}

void Service::handle(HttpRequest req, Respond respond) {
  const std::string path = path_of(req.target);
  // The row of this method and path; else whether the path is served by another method.
  const Route* route = nullptr;
  std::string methods;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const Route& r : route_table()) {
    if (path != r.path) continue;
    if (method == r.method) route = &r;
    if (methods.find(r.method) == std::string::npos) {
      methods += (methods.empty() ? "" : " and ") + std::string(r.method);
    }
  }
  const RouteKind kind = route == nullptr                   ? RouteKind::kHealth
                         : route->kind == RouteKind::kModel ? model_route()
                                                            : route->kind;
  // /metrics counts a request under its row's path; POST / and /invocations under the route
  // they resolve to.
  std::string label = route == nullptr ? (methods.empty() ? "other" : path) : route->path;
  if (route != nullptr && route->kind == RouteKind::kModel) {
    label = kind == RouteKind::kEmbed    ? "/embed"
            : kind == RouteKind::kRerank ? "/rerank"
                                         : "/predict";
  }
  Metrics& metrics = metrics_;
  Respond finish = [&metrics, label, respond = std::move(respond)](HttpResponse r) {
    metrics.request(label, r.status);
    respond(std::move(r));
  };
  try {
    if (req.authorization_headers > 1) {
      throw ApiError(
          400, "validation",
          cat("the request has ", req.authorization_headers, " Authorization headers; send one"),
          "duplicate_authorization");
    }
    if (methods.empty()) throw ApiError(404, "not_found", "no route " + path);
    // HEAD is GET without the body (which the connection leaves out).
    if (route == nullptr) {
      throw ApiError(
          405, "method_not_allowed",
          cat(path, " accepts ", methods,
              methods.find("GET") != std::string::npos ? " (and HEAD)" : "", ", not ", req.method));
    }
    if (route->needs_key && !authorized(req)) {
      throw ApiError(401, "unauthorized", "missing or wrong `Authorization: Bearer` key");
    }
    switch (kind) {  // a copy of finish: it answers their errors
      case RouteKind::kPredict:
      case RouteKind::kModel:
        return predict(req, finish);
      case RouteKind::kEmbed:
        return embed(req, finish);
      case RouteKind::kEmbedAll:
        return embed_all(req, finish);
      case RouteKind::kEmbedSparse:
        refuse(path, "Model is not an embedding model with SPLADE pooling",
               "a SPLADE model; bertfit serves dense embeddings at /embed");
      case RouteKind::kSimilarity:
        return similarity(req, finish);
      case RouteKind::kOpenAiEmbed:
        return openai_embed(req, finish);
      case RouteKind::kRerank:
        return rerank(req, finish);
      case RouteKind::kTokenize:
        return finish(tokenize(req));
      case RouteKind::kDecode:
        return finish(decode(req));
      case RouteKind::kHealth:
        return finish(health());
      case RouteKind::kInfo:
        return finish(info());
      case RouteKind::kOpenApi: {
        HttpResponse r;
        r.body = openapi_document(info_.version);
        return finish(std::move(r));
      }
      case RouteKind::kDocs:
        return finish(docs_page());
      case RouteKind::kMetrics:
        break;
    }
    HttpResponse r;
    r.body = metrics_.render();
    r.content_type = "text/plain; version=0.0.4";
    finish(std::move(r));
  } catch (const ApiError& e) {
    metrics_.rejection(e.reason(), e.status());
    HttpResponse r = error_response(e.status(), e.type(), e.what());
    if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    if (e.status() == 429 || e.status() == 503) r.headers.emplace_back("Retry-After", "1");
    finish(std::move(r));
  } catch (const std::exception& e) {
    metrics_.rejection("backend", 500);
    finish(error_response(500, "backend", e.what()));
  }
}

std::shared_ptr<void> Service::take_place() {
  auto place = std::make_shared<InFlight>(in_flight_, metrics_);
  if (place->value() > options_.max_concurrent_requests) {
    throw ApiError(429, "overloaded", "Model is overloaded");
  }
  return place;
}

const char* Service::task() const {
  return embedder_ ? "feature-extraction"
         : tagger_ ? "token-classification"
                   : "text-classification";
}

bool Service::cross_encoder() const { return !embedder_ && !tagger_ && config_.num_labels == 1; }

bool Service::serves(RouteKind kind) const {
  switch (kind) {
    case RouteKind::kPredict:
      return !embedder_;
    case RouteKind::kEmbed:
    case RouteKind::kEmbedAll:
    case RouteKind::kSimilarity:
    case RouteKind::kOpenAiEmbed:
      return embedder_;
    case RouteKind::kRerank:
      return cross_encoder();
    case RouteKind::kEmbedSparse:
      return false;  // no SPLADE model is served
    default:
      return true;
  }
}

std::vector<std::string> Service::routes() const {
  std::vector<std::string> r;
  for (const Route& route : route_table()) {
    const bool listed = std::find(r.begin(), r.end(), route.path) != r.end();
    if (!listed && serves(route.kind)) r.emplace_back(route.path);
  }
  return r;
}

void Service::refuse(const std::string& route, const char* tei_message, const char* needs) const {
  std::string what = head_kind_noun(config_.head);
  if (!embedder_) what += cat(" of ", model_head(config_).output_width(config_), " outputs");
  throw ApiError(424, "backend",
                 cat("Backend error: ", tei_message, ": the model is a ", what, " (task ", task(),
                     "); ", route, " needs ", needs),
                 "model_type");
}

void Service::require_embedder(const char* route) const {
  if (!embedder_) {
    refuse(route, "Model is not an embedding model",
           "an embedding model (a sentence-transformers folder)");
  }
}

void Service::predict(const HttpRequest& req, Respond respond) {
  if (embedder_) {
    refuse("/predict", "Model is not a classifier model",
           "a classifier; an embedding model answers /embed");
  }
  auto place = take_place();
  PredictRequest request =
      decode_predict_request(req.body, options_.max_client_batch_size,
                             tagger_ ? InputShape::kTexts : InputShape::kTextsOrPairs);
  // A sequence classifier ignores aggregation_strategy, as TEI ignores keys it does not know.
  Aggregation how = Aggregation::kSimple;
  if (tagger_) {
    if (request.raw_scores) {
      throw ApiError(422, "validation",
                     "Input validation error: `raw_scores` applies to sequence classifiers; a "
                     "token classifier answers entities with probabilities");
    }
    if (request.aggregation_strategy) {
      const std::optional<Aggregation> parsed = parse_aggregation(*request.aggregation_strategy);
      if (!parsed) {
        throw ApiError(422, "validation",
                       cat("Input validation error: `aggregation_strategy` must be one of none, "
                           "simple, first, average, max; got \"",
                           *request.aggregation_strategy, "\""));
      }
      how = *parsed;
    }
  }
  const bool truncate = request.truncate.value_or(options_.auto_truncate);
  const bool batch = request.batch, raw = request.raw_scores;
  // A token classifier's entities index its texts.
  auto texts = std::make_shared<std::vector<std::string>>();
  if (tagger_) {
    for (const TextInput& input : request.inputs) texts->push_back(input.a);
  }
  const std::size_t K = static_cast<std::size_t>(config_.num_labels);
  submit(req, std::move(place), request.inputs, truncate, request.direction, tagger_, Output::kHead,
         std::move(respond), [this, batch, raw, how, texts, K](const Job& done) {
           std::string body;
           if (batch) body += '[';
           for (std::size_t i = 0; i < done.inputs.size(); ++i) {
             if (i > 0) body += ',';
             const float* logits = done.logits.data() + done.row_start[i] * K;
             if (tagger_) {
               append_entities(body, std::move((*texts)[i]), done.inputs[i], logits, how);
             } else {
               append_predictions(body, logits, raw);
             }
           }
           if (batch) body += ']';
           return body;
         });
}

ApiError Service::answer_too_large(std::size_t bytes) const {
  return ApiError(413, "validation",
                  cat("the answer would be ", bytes, " bytes, over the ", options_.max_answer_bytes,
                      " of --max-answer-bytes; send fewer or shorter inputs"),
                  "answer_limit");
}

void Service::submit(const HttpRequest& req, std::shared_ptr<void> place,
                     const std::vector<TextInput>& inputs, bool truncate,
                     TruncationDirection direction, bool with_offsets, Output output,
                     Respond respond, std::function<std::string(const Job&)> format,
                     const AnswerBound& bound, const std::vector<std::int32_t>* first_tokens) {
  auto job = std::make_shared<Job>();
  job->output = output;
  job->client_gone = req.client_gone;
  job->inputs.reserve(inputs.size());
  const Clock::time_point tokenize_start = Clock::now();
  std::int64_t tokens = 0;
  std::size_t characters = 0;
  for (const TextInput& input : inputs) {
    job->inputs.push_back(first_tokens != nullptr && input.b
                              ? encode_pair(tokenizer_, *first_tokens, *input.b, truncate,
                                            direction, max_input_length())
                              : encode_input(tokenizer_, input, truncate, direction,
                                             max_input_length(), with_offsets));
    tokens += static_cast<std::int64_t>(job->inputs.back().input_ids.size());
    metrics_.input_tokens(static_cast<std::int64_t>(job->inputs.back().input_ids.size()));
    // TEI counts an id list's ids as its characters.
    characters += input.ids ? input.ids->size() : input.a.size() + (input.b ? input.b->size() : 0);
  }
  if (bound) {
    const std::size_t bytes = bound(job->inputs);
    if (bytes > options_.max_answer_bytes) throw answer_too_large(bytes);
  }
  const double n = static_cast<double>(job->inputs.size());
  const double tokenization = seconds_since(tokenize_start) / n;
  const std::string family = embedder_ ? "embed" : "predict";
  metrics_.te_request(family, job->inputs.size());
  for (std::size_t i = 0; i < job->inputs.size(); ++i) metrics_.tokenization(tokenization);
  const Clock::time_point start = req.start;
  // On the compute worker: the answer is formatted there, then handed to the connections.
  job->on_done = [this, place, respond, start, n, tokens, tokenization, characters, family,
                  format = std::move(format)](std::shared_ptr<Job> done) {
    HttpResponse r;
    if (done->gone()) {
      metrics_.rejection("client_gone", 0);
      r = error_response(499, "client_gone", "the client closed the connection");
    } else if (done->timed_out) {
      metrics_.rejection("queue_timeout", 503);
      r = error_response(503, "overloaded",
                         cat("the request waited over ", options_.limits.max_queue_seconds,
                             " s (--max-queue-time) for the model"));
      r.headers.emplace_back("Retry-After", "1");
    } else if (done->failed) {
      metrics_.rejection("inference_failed", 424);
      r = error_response(424, "backend", "Inference failed");
    } else {
      r.body = format(*done);
      if (r.body.size() > options_.max_answer_bytes) {
        const ApiError e = answer_too_large(r.body.size());
        metrics_.rejection(e.reason(), e.status());
        r = error_response(e.status(), e.type(), e.what());
      } else {
        const double total = seconds_since(start);
        metrics_.request_duration(total);
        metrics_.te_success(family, done->inputs.size(), total, tokenization,
                            done->queue_seconds / n, done->inference_seconds / n);
        r.headers = {{"x-compute-type", "cpu"},
                     {"x-compute-time", millis(total)},
                     {"x-compute-characters", std::to_string(characters)},
                     {"x-compute-tokens", std::to_string(tokens)},
                     {"x-total-time", millis(total)},
                     {"x-tokenization-time", millis(tokenization)},
                     {"x-queue-time", millis(done->queue_seconds / n)},
                     {"x-inference-time", millis(done->inference_seconds / n)}};
      }
    }
    post_([place, respond, r = std::move(r)]() mutable { respond(std::move(r)); });
  };
  switch (batcher_.submit(job)) {
    case Admission::kQueued:
      return;
    case Admission::kFull:
      throw ApiError(429, "overloaded",
                     cat("Model is overloaded: ", options_.limits.max_queued_tokens,
                         " tokens (--max-queued-tokens) are already waiting"),
                     "queue_full");
    case Admission::kStopping:
      break;
  }
  throw ApiError(503, "unhealthy", "the server is shutting down", "shutting_down");
}

void Service::rerank(const HttpRequest& req, Respond respond) {
  if (!cross_encoder()) {
    refuse("/rerank", "model is not a re-ranker model",
           "a cross-encoder (a sequence classifier with one output)");
  }
  auto place = take_place();
  RerankRequest request = decode_rerank_request(req.body, options_.max_client_batch_size);
  // The query is tokenized once, not once per text.
  std::vector<std::int32_t> query;
  std::string lowered;  // a lowercasing model's query (Tokenizer::input_text)
  tokenizer_.tokenize_into(tokenizer_.input_text(request.query, lowered), query, nullptr);
  std::vector<TextInput> inputs;
  for (const std::string& text : request.texts)
    inputs.push_back({request.query, text, std::nullopt});
  auto texts = std::make_shared<std::vector<std::string>>(std::move(request.texts));
  const bool raw = request.raw_scores, with_text = request.return_text;
  submit(
      req, std::move(place), inputs, request.truncate.value_or(options_.auto_truncate),
      request.direction, /*with_offsets=*/false, Output::kHead, std::move(respond),
      [texts, raw, with_text](const Job& done) {
        // TEI's answer: [{"index", "score", "text"?}] by descending score (ties: input order).
        std::vector<std::pair<double, std::size_t>> scores;
        for (std::size_t i = 0; i < done.inputs.size(); ++i) {
          const double logit = done.logits[done.row_start[i]];
          scores.emplace_back(raw ? logit : 1.0 / (1.0 + std::exp(-logit)), i);
        }
        std::stable_sort(scores.begin(), scores.end(),
                         [](const auto& x, const auto& y) { return x.first > y.first; });
        json list = json::array();
        for (const auto& [score, i] : scores) {
          json item = {{"index", i}, {"score", score}};
          if (with_text) item["text"] = (*texts)[i];
          list.push_back(std::move(item));
        }
        return list.dump(-1, ' ', false, json::error_handler_t::replace);
      },
      /*bound=*/{}, &query);
}

void Service::append_predictions(std::string& out, const float* logits, bool raw_scores) const {
  const int K = config_.num_labels;
  std::vector<std::pair<double, int>> scores(K);
  for (int k = 0; k < K; ++k) scores[k] = {static_cast<double>(logits[k]), k};
  if (!raw_scores) {
    switch (config_.problem()) {
      case ProblemType::kRegression:
        break;
      case ProblemType::kMultiLabel:
        for (auto& s : scores) s.first = 1.0 / (1.0 + std::exp(-s.first));
        break;
      case ProblemType::kSingleLabel: {
        // As `bertfit predict`: in double, from the float logits, less their maximum.
        double mx = scores[0].first, sum = 0;
        for (const auto& s : scores) mx = std::max(mx, s.first);
        for (auto& s : scores) sum += s.first = std::exp(s.first - mx);
        for (auto& s : scores) s.first /= sum;
        break;
      }
    }
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  json list = json::array();
  for (const auto& [score, k] : scores) {
    list.push_back({{"label", config_.id2label.at(k)}, {"score", score}});
  }
  out += list.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Service::append_entities(std::string& out, std::string text, const Encoding& input,
                              const float* logits, Aggregation how) const {
  const Tagging tagging = tag_text(text_from_encoding(std::move(text), input), logits,
                                   config_.id2label, tokenizer_, how);
  json list = json::array();
  for (const Entity& e : tagging.entities) list.push_back(entity_json(e, how));
  out += list.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse Service::health() const {
  if (!batcher_.healthy()) throw ApiError(503, "unhealthy", "unhealthy");
  HttpResponse r;
  r.content_type = "text/plain";
  return r;
}

HttpResponse Service::info() const {
  json id2label = json::object(), label2id = json::object();
  for (int k = 0; k < config_.num_labels; ++k) {
    id2label[std::to_string(k)] = config_.id2label.at(k);
    label2id[config_.id2label.at(k)] = k;
  }
  const char* problem = config_.problem() == ProblemType::kRegression ? "regression"
                        : config_.problem() == ProblemType::kMultiLabel
                            ? "multi_label_classification"
                            : "single_label_classification";
  json model_type;
  if (embedder_) {
    std::string pooling;
    for (Pooling p : config_.pooling)
      pooling += (pooling.empty() ? "" : "+") + std::string(pooling_name(p));
    model_type = {
        {"embedding",
         {{"pooling", pooling}, {"dimensions", model_head(config_).output_width(config_)}}}};
  } else {
    // TEI's ModelType: a one-output sequence classifier is a reranker.
    model_type = {{tagger_           ? "token_classifier"
                   : cross_encoder() ? "reranker"
                                     : "classifier",
                   {{"id2label", id2label}, {"label2id", label2id}}}};
  }
  json j = {
      {"model_id", info_.model_id},
      {"model_sha", nullptr},
      {"weights_file", info_.weights_file},
      {"weights_sha256", info_.weights_sha256},
      {"model_dtype", info_.dtype},
      {"served_model_name", served_model_name()},
      {"model_type", model_type},
      {"task", task()},
      {"routes", routes()},
      {"architecture", config_.model_type()},
      {"max_concurrent_requests", options_.max_concurrent_requests},
      {"max_input_length", max_input_length()},
      {"max_batch_tokens", options_.limits.max_batch_tokens},
      {"max_batch_requests", options_.limits.max_batch_requests > 0
                                 ? json(options_.limits.max_batch_requests)
                                 : json(nullptr)},
      {"max_client_batch_size", options_.max_client_batch_size},
      {"auto_truncate", options_.auto_truncate},
      {"tokenization_workers", options_.tokenization_workers},
      {"version", info_.version},
  };
  // An embedding model has no classification problem.
  if (!embedder_) j["problem_type"] = problem;
  HttpResponse r;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

}  // namespace bertfit::serve
