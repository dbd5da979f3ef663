// `bertfit serve`: an HTTP server answering Hugging Face text-embeddings-inference's /predict,
// /tokenize, /decode, /health, /info and /metrics (and the embedding routes for a
// sentence-transformers folder) for one model folder
// (src/serve). Loads the model, prepares its weights once, warms the activations up to the
// largest batch, prints `serve: listening on HOST:PORT` on stderr and serves until SIGINT or
// SIGTERM, after which it answers the requests in flight and exits 0. The API key may come from
// --api-key, --api-key-file or $BERTFIT_API_KEY.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/inference.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/log.h"
#include "base/parallel.h"
#include "flags/groups.h"
#include "hub/fetch.h"
#include "model/model_io.h"
#include "serve/batcher.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "serve/service.h"
#include "task/dataset.h"
#include "tokenizer/tokenizer.h"

namespace bertfit::cli {
namespace {

struct ServeOptions {
  std::string model_dir;
  std::string revision = "main";
  ComputeOptions compute;    // --precision, --threads
  std::string tuned_config;  // --config: applied by main before parsing (tuned_config.h)
  std::optional<Pooling> pooling;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::int64_t max_batch_tokens = 16384;
  std::int64_t max_batch_requests = 0;
  int max_concurrent_requests = 512;
  int max_client_batch_size = 32;
  bool auto_truncate = false;
  std::string api_key;
  int tokenization_workers = 0;
  double read_timeout = 30, idle_timeout = 60;
  int max_connections = 0;             // 0: what the descriptor limit allows
  std::int64_t max_queued_tokens = 0;  // 0: 4 batches
  double max_queue_time = 30;
  std::string api_key_file;
  bool api_key_given = false;  // --api-key was on the command line (even empty)
  std::int64_t max_answer_bytes = std::int64_t{32} << 20;
  std::string served_model_name;  // empty: --model as given
};

// Seconds that a timer can hold: finite, positive, at most a year.
void check_seconds(const char* flag, double value) {
  if (!(std::isfinite(value) && value > 0 && value <= 365.0 * 86400)) {
    throw_error(flag, " must be a number of seconds > 0 and <= 31536000, got ", value);
  }
}

// The API key: --api-key, else the first line of --api-key-file (a UTF-8 byte order mark before
// it dropped), else $BERTFIT_API_KEY (the last two keep it out of `ps`). None given: no
// authorization. An empty key given any way is an error (it would look like protection and be
// none).
std::string api_key(const ServeOptions& o) {
  if (o.api_key_given && !o.api_key_file.empty()) {
    throw_error("give --api-key or --api-key-file, not both");
  }
  if (!o.api_key_file.empty()) {
    std::ifstream in(o.api_key_file);
    std::string key;
    if (!in || !std::getline(in, key)) {
      throw_error("--api-key-file ", o.api_key_file, ": cannot read a key from it");
    }
    if (key.starts_with("\xEF\xBB\xBF")) key.erase(0, 3);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) {
      key.pop_back();
    }
    if (key.empty()) throw_error("--api-key-file ", o.api_key_file, ": the first line is empty");
    return key;
  }
  if (o.api_key_given) {
    if (o.api_key.empty()) {
      throw_error("--api-key is empty: give a key, or leave the flag out to serve without one");
    }
    log_warn(
        "serve: --api-key shows the key to anyone who can list processes; "
        "--api-key-file or BERTFIT_API_KEY keep it hidden");
    return o.api_key;
  }
  const char* env = std::getenv("BERTFIT_API_KEY");
  if (env != nullptr && *env == '\0') {
    throw_error("BERTFIT_API_KEY is set but empty: give a key, or unset it to serve without one");
  }
  return env != nullptr ? env : "";
}

// The connections the process can hold: raises the soft descriptor limit to the hard one (as Go
// and nginx do), then leaves room for what is open now and a margin for the model's files.
int max_connections(int requested) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return requested > 0 ? requested : 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = std::min<rlim_t>(limit.rlim_max, 1 << 20);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  long open = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++open;
  }
  const long available = static_cast<long>(std::min<rlim_t>(limit.rlim_cur, 1 << 20)) - open - 32;
  if (requested > 0) {
    if (requested > available) {
      log_warn("serve: --max-connections ", requested, " is over the ", available,
               " connections `ulimit -n` (", limit.rlim_cur,
               ") leaves; accepting pauses when descriptors run out");
    }
    return requested;
  }
  if (available < 1) {
    throw_error("`ulimit -n` ", limit.rlim_cur, " leaves no descriptor for a connection");
  }
  return static_cast<int>(std::min<long>(available, 65536));
}

const char* dtype_name(Precision p) {
  switch (p) {
    case Precision::kBF16:
      return "bfloat16";
    case Precision::kInt8:
      return "int8";
    case Precision::kF32:
      break;
  }
  return "float32";
}

void run(const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535) throw_error("--port must be in [0, 65535], got ", o.port);
  if (o.max_concurrent_requests < 1 || o.max_client_batch_size < 1 || o.max_batch_requests < 0) {
    throw_error(
        "--max-concurrent-requests and --max-client-batch-size must be >= 1, "
        "--max-batch-requests >= 0");
  }
  check_seconds("--read-timeout", o.read_timeout);
  check_seconds("--idle-timeout", o.idle_timeout);
  check_seconds("--max-queue-time", o.max_queue_time);
  for (const auto& [flag, value] :
       {std::pair<const char*, std::int64_t>{"--max-connections", o.max_connections},
        {"--max-queued-tokens", o.max_queued_tokens},
        {"--tokenization-workers", o.tokenization_workers}}) {
    if (value < 0) throw_error(flag, " must be >= 0 (0: the default), got ", value);
  }
  if (o.max_answer_bytes < 1) {
    throw_error("--max-answer-bytes must be >= 1, got ", o.max_answer_bytes);
  }
  const std::string key = api_key(o);
  // The model runs on the compute worker's OpenMP team alone (--threads is set there). This
  // thread loads and prepares it with one thread, so it starts no OpenMP pool of its own:
  // libgomp spins between parallel regions only while it manages no more threads than there
  // are CPUs, and a second pool made the worker's team sleep and wake in every region (a 64-token
  // int8 forward 6.0 -> 7.3 ms on 2 cores; docs/DESIGN.md, "One OpenMP pool").
  set_num_threads(1);
  const Precision precision = runnable_precision(o.compute.precision);
  const std::string folder = resolve_model_flag(o.model_dir, o.revision);
  ModelState state = load_model(folder, {.require_head = true, .pooling = o.pooling});
  const std::unique_ptr<Tokenizer> tokenizer_ptr = load_tokenizer(folder);
  if (state.sentence_transformer && state.sentence_transformer->do_lower_case) {
    tokenizer_ptr->set_lowercase_input(true);  // the Transformer module's do_lower_case
  }
  const Tokenizer& tokenizer = *tokenizer_ptr;
  check_tokenizer_fits(tokenizer, state.config, folder);
  if (o.max_batch_tokens < state.config.max_tokens()) {
    throw_error("--max-batch-tokens ", o.max_batch_tokens, " must hold one input of the ",
                state.config.max_tokens(), " tokens the model's positions allow");
  }
  const std::int64_t max_queued_tokens =
      o.max_queued_tokens > 0 ? o.max_queued_tokens : 4 * o.max_batch_tokens;
  if (max_queued_tokens < o.max_batch_tokens) {
    throw_error("--max-queued-tokens ", o.max_queued_tokens,
                " must be at least --max-batch-tokens (", o.max_batch_tokens, ")");
  }
  const int connections = max_connections(o.max_connections);
  const std::string weights = model_weights_path(folder);
  serve::ServeInfo info{o.model_dir,
                        std::filesystem::path(weights).filename().string(),
                        hub::sha256_file_hex(weights),
                        dtype_name(precision),
                        BERTFIT_VERSION,
                        o.served_model_name};

  serve::Engine engine(state, precision, o.max_batch_tokens);
  serve::Metrics metrics;
  serve::BatchLimits limits{o.max_batch_tokens, o.max_batch_requests, o.compute.threads,
                            max_queued_tokens, o.max_queue_time};
  serve::Batcher batcher(engine, metrics, limits,
                         [&] { engine.warm_up(tokenizer.cls_id(), tokenizer.sep_id()); });
  const int workers = o.tokenization_workers > 0
                          ? o.tokenization_workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  serve::ServiceOptions service_options;
  service_options.max_client_batch_size = o.max_client_batch_size;
  service_options.max_concurrent_requests = o.max_concurrent_requests;
  service_options.auto_truncate = o.auto_truncate;
  service_options.api_key = key;
  service_options.max_answer_bytes = static_cast<std::size_t>(o.max_answer_bytes);
  service_options.limits = limits;
  service_options.tokenization_workers = workers;
  if (state.sentence_transformer) {
    service_options.max_seq_length = state.sentence_transformer->max_seq_length.value_or(0);
    service_options.prompts = state.sentence_transformer->prompts;
    service_options.default_prompt_name = state.sentence_transformer->default_prompt_name;
  }
  serve::Service service(state.config, tokenizer, batcher, metrics, service_options, info);
  serve::HttpOptions http;
  http.host = o.host;
  http.port = o.port;
  http.threads = workers;
  http.read_timeout = o.read_timeout;
  http.idle_timeout = o.idle_timeout;
  http.max_connections = connections;
  serve::serve_http(http, service, [&](const std::string& host, int port) {
    const bool v6 = host.find(':') != std::string::npos;
    std::fprintf(stderr, "serve: listening on %s%s%s:%d\n", v6 ? "[" : "", host.c_str(),
                 v6 ? "]" : "", port);
    std::fflush(stderr);
  });
  batcher.stop();
  log_info("serve: stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over HTTP with Hugging Face text-embeddings-inference's routes: POST "
      "/predict, /embed, /embed_all, /embed_sparse, /similarity, /v1/embeddings (and "
      "/embeddings), /rerank, /tokenize and /decode, POST / and /invocations (the model's own "
      "route: /embed, /rerank or /predict, as TEI routes them), GET /health (also / and /ping), "
      "/info, /metrics, /api-doc/openapi.json and /docs. A sequence classifier "
      "answers each input's label scores (TEI's answer; a one-output one also /rerank); a token "
      "classifier each text's entities with character offsets (the Hub's token-classification "
      "answer; `aggregation_strategy` in the request, default simple); a sentence-transformers "
      "folder /embed, /v1/embeddings, /embed_all (every token's last-layer vector) and "
      "/similarity (cosines); any model /tokenize and /decode. A route the model cannot serve is "
      "TEI's 424 naming its task; /info lists the routes it serves. Requests of every model route "
      "are batched dynamically on one compute worker. Prints `serve: listening on "
      "HOST:PORT` on stderr when ready; SIGINT or SIGTERM stops it after the requests in flight "
      "are answered. A model without a trained head is refused at start.");
  add_flags(*cmd, join_flags({model_flags(o->model_dir, o->revision),
                              select_flags(compute_flags(o->compute), {"--precision", "--threads"}),
                              tuned_config_flags(o->tuned_config)}));
  cmd->get_option("--model")->required();
  add_flags(*cmd, pooling_flags(o->pooling));
  add_flags(
      *cmd,
      {{"--host", "Address to listen on", &o->host},
       {"--port", "Port to listen on; 0: any free port (printed on stderr)", &o->port},
       {"--max-batch-tokens",
        "Real tokens per batch of the compute worker (at least max_position_embeddings)",
        &o->max_batch_tokens},
       {"--max-batch-requests", "Inputs per batch; 0: no limit", &o->max_batch_requests},
       {"--max-concurrent-requests",
        "/predict requests in progress at once; more are refused with 429",
        &o->max_concurrent_requests},
       {"--max-client-batch-size", "Inputs in one request; more are refused with 413",
        &o->max_client_batch_size},
       {"--auto-truncate",
        "Truncate inputs longer than the model takes (max_position_embeddings; an embedder's "
        "max_seq_length) unless a request says "
        "\"truncate\": false (without it, such inputs are refused with 422 unless the request "
        "says \"truncate\": true)",
        &o->auto_truncate},
       {"--max-queued-tokens",
        "Real tokens that may wait for the model; a /predict beyond them is refused with 429; "
        "0: 4 x --max-batch-tokens",
        &o->max_queued_tokens},
       {"--max-queue-time",
        "Seconds an input may wait for the model; a request that waited longer gets 503 with "
        "Retry-After",
        &o->max_queue_time},
       {"--max-connections",
        "Open connections; a new one beyond them replaces the connection idle the longest, or is "
        "closed; 0: what `ulimit -n` allows",
        &o->max_connections},
       {"--api-key",
        "Require `Authorization: Bearer KEY` on every route but /health and /metrics (visible in "
        "`ps`: prefer --api-key-file or the BERTFIT_API_KEY variable)",
        &o->api_key},
       {"--api-key-file", "Read the API key from the first line of this file", &o->api_key_file},
       {"--max-answer-bytes",
        "Bytes of the largest answer; a request whose answer would be larger is refused with 413 "
        "(before any work when the size is known in advance, as for /embed_all)",
        &o->max_answer_bytes},
       {"--served-model-name",
        "The model's name in /info (served_model_name) and in the `model` of /v1/embeddings' "
        "answers, as TEI's flag; default: --model as given",
        &o->served_model_name},
       {"--tokenization-workers", "Connection threads, which also tokenize; 0: one per core",
        &o->tokenization_workers},
       {"--read-timeout",
        "Seconds for a request to arrive whole once it has started, and for an answer to be "
        "written",
        &o->read_timeout},
       {"--idle-timeout", "Seconds a keep-alive connection may wait for its next request",
        &o->idle_timeout}});
  cmd->callback([o, cmd] {
    o->api_key_given = cmd->count("--api-key") > 0;
    run(*o);
  });
}

}  // namespace bertfit::cli
