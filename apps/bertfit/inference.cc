// Shared set-up of the inference commands (eval, predict).
#include "apps/bertfit/inference.h"

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/log.h"
#include "base/parallel.h"
#include "base/timer.h"
#include "task/dataset.h"

namespace bertfit::cli {

void add_inference_flags(CLI::App& cmd, InferenceOptions& o) {
  add_flags(cmd, join_flags({model_flags(o.model_dir, o.revision), compute_flags(o.compute),
                             tuned_config_flags(o.tuned_config)}));
  cmd.get_option("--model")->required();
}

InferenceModel load_for_inference(const InferenceOptions& o) {
  const ComputeOptions& c = o.compute;
  if (c.threads > 0) set_num_threads(c.threads);
  if (c.batch_size <= 0) throw_error("--batch-size must be > 0, got ", c.batch_size);
  const std::string folder = resolve_model_flag(o.model_dir, o.revision);
  InferenceModel m{load_model(folder, {.require_head = true, .pooling = o.pooling}),
                   load_tokenizer(folder), runnable_precision(c.precision)};
  check_tokenizer_fits(*m.tokenizer, m.state.config, folder);
  if (m.state.sentence_transformer && m.state.sentence_transformer->do_lower_case) {
    m.tokenizer->set_lowercase_input(true);  // the Transformer module's do_lower_case
  }
  if (c.max_seq_len > m.state.config.max_tokens()) {
    throw_error("--max-seq-len ", c.max_seq_len, " exceeds the ", m.state.config.max_tokens(),
                " tokens the model's max_position_embeddings (", m.state.config.max_positions,
                ") hold");
  }
  return m;
}

std::function<void(std::int64_t, std::int64_t)> progress_reporter(const std::string& what) {
  // BERTFIT_PROGRESS_SECONDS sets the interval (default 2; 0 reports every batch).
  double interval = 2.0;
  if (const char* env = std::getenv("BERTFIT_PROGRESS_SECONDS")) interval = std::atof(env);
  struct State {
    Timer timer;
    double last = 0;  // when the last line was printed (0: the start)
    bool reported = false;
  };
  auto st = std::make_shared<State>();
  return [what, st, interval](std::int64_t done, std::int64_t total) {
    const double now = st->timer.seconds();
    // A line when the interval has passed, and a closing one for a run that printed any.
    if (now - st->last < interval && !(done == total && st->reported)) return;
    st->last = now;
    st->reported = true;
    log_info(what, ": ", done, "/", total, " rows (", static_cast<int>(now), " s)");
  };
}

TableOptions table_options_of(const DataOptions& d) {
  TableOptions t;
  t.header = !d.no_header;
  t.skip_malformed = d.skip_malformed;
  t.format = d.format;
  return t;
}

// The output: one JSON line per input, each with its "row", and one per malformed row left out
// ({"row", "line", "skipped": reason}), merged in file order. Both lists are in file order.
std::string in_file_order(const std::vector<nlohmann::json>& lines,
                          const std::vector<SkippedRow>& skipped) {
  std::string out;
  std::size_t next = 0;
  auto skipped_before = [&](std::int64_t row) {
    for (; next < skipped.size() && skipped[next].row < row; ++next) {
      const SkippedRow& s = skipped[next];
      out += nlohmann::json{{"row", s.row}, {"line", s.line}, {"skipped", s.reason}}.dump() + "\n";
    }
  };
  for (const nlohmann::json& j : lines) {
    skipped_before(j["row"].get<std::int64_t>());
    out += j.dump() + "\n";
  }
  skipped_before(INT64_MAX);
  return out;
}

}  // namespace bertfit::cli
