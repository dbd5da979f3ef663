// `bertfit serve`: an HTTP server answering Hugging Face text-embeddings-inference's /predict,
// /tokenize, /health, /info and /metrics for one sequence-classification model folder
// (src/serve). Loads the model, prepares its weights once, warms the activations up to the
// largest batch, prints `serve: listening on HOST:PORT` on stderr and serves until SIGINT or
// SIGTERM, after which it answers the requests in flight and exits 0.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
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
  ComputeOptions compute;  // --precision, --threads
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
};

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
  if (!(o.read_timeout > 0 && o.idle_timeout > 0)) {
    throw_error("--read-timeout and --idle-timeout must be > 0");
  }
  // The model runs on the compute worker's OpenMP team alone (--threads is set there). This
  // thread loads and prepares it with one thread, so it starts no OpenMP pool of its own:
  // libgomp spins between parallel regions only while it manages no more threads than there
  // are CPUs, and a second pool made the worker's team sleep and wake in every region (a 64-token
  // int8 forward 6.0 -> 7.3 ms on 2 cores; docs/DESIGN.md, "One OpenMP pool").
  set_num_threads(1);
  const Precision precision = runnable_precision(o.compute.precision);
  const std::string folder = resolve_model_flag(o.model_dir, o.revision);
  ModelState state = load_model(folder);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::from_model_dir(folder);
  check_tokenizer_fits(tokenizer, state.config, folder);
  if (o.max_batch_tokens < state.config.max_positions) {
    throw_error("--max-batch-tokens ", o.max_batch_tokens,
                " must hold one input of max_position_embeddings (", state.config.max_positions,
                ") tokens");
  }
  const std::string weights = model_weights_path(folder);
  serve::ServeInfo info{o.model_dir, std::filesystem::path(weights).filename().string(),
                        hub::sha256_file_hex(weights), dtype_name(precision), BERTFIT_VERSION};

  serve::Engine engine(state, precision, o.max_batch_tokens);
  serve::Metrics metrics;
  serve::BatchLimits limits{o.max_batch_tokens, o.max_batch_requests, o.compute.threads};
  serve::Batcher batcher(engine, metrics, limits,
                         [&] { engine.warm_up(tokenizer.cls_id(), tokenizer.sep_id()); });
  const int workers = o.tokenization_workers > 0
                          ? o.tokenization_workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  serve::ServiceOptions service_options{o.max_client_batch_size,
                                        o.max_concurrent_requests,
                                        o.auto_truncate,
                                        o.api_key,
                                        limits,
                                        workers};
  serve::Service service(state.config, tokenizer, batcher, metrics, service_options, info);
  serve::HttpOptions http{o.host, o.port, workers, o.read_timeout, o.idle_timeout};
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
      "Serve a sequence-classification model over HTTP with Hugging Face "
      "text-embeddings-inference's routes: POST /predict (also / and /invocations), POST "
      "/tokenize, GET /health, /info and /metrics. Requests are batched dynamically on one "
      "compute worker. Prints `serve: listening on HOST:PORT` on stderr when ready; SIGINT or "
      "SIGTERM stops it after the requests in flight are answered.");
  add_flags(*cmd,
            join_flags({model_flags(o->model_dir, o->revision),
                        select_flags(compute_flags(o->compute), {"--precision", "--threads"})}));
  cmd->get_option("--model")->required();
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
        "Truncate inputs longer than max_position_embeddings unless a request says "
        "\"truncate\": false (without it, such inputs are refused with 422 unless the request "
        "says \"truncate\": true)",
        &o->auto_truncate},
       {"--api-key", "Require `Authorization: Bearer KEY` on every route but /health and /metrics",
        &o->api_key},
       {"--tokenization-workers", "Connection threads, which also tokenize; 0: one per core",
        &o->tokenization_workers},
       {"--read-timeout",
        "Seconds for a request to arrive whole once it has started, and for an answer to be "
        "written",
        &o->read_timeout},
       {"--idle-timeout", "Seconds a keep-alive connection may wait for its next request",
        &o->idle_timeout}});
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
