// `bertfit forward`: one forward (and backward) pass on a batch given as JSON, for parity checks
// against ../shared/peer/torch_peer.py: prints {"logits": [...], "loss": x} and optionally
// writes d loss / d parameter for every parameter under its HF name.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/bertfit/cli_flags.h"
#include "apps/bertfit/commands.h"
#include "apps/bertfit/model_source.h"
#include "base/error.h"
#include "base/file.h"
#include "base/parallel.h"
#include "flags/groups.h"
#include "io/safetensors.h"
#include "model/bert.h"
#include "model/contrastive.h"
#include "model/family.h"
#include "model/head.h"
#include "model/model_io.h"

namespace bertfit::cli {
namespace {

struct ForwardOptions {
  std::string model_dir, revision = "main", batch_path, grads_path;
  bool train_mode = false;
  std::int64_t seed = 42;
  ComputeOptions compute;  // --precision, --threads
};

// Reads a (B,T) integer matrix; Error naming the file and key when it is ragged or absent.
std::vector<std::int32_t> read_matrix(const nlohmann::json& j, const std::string& key,
                                      const std::string& path, int& B, int& T) {
  if (!j.contains(key) || !j[key].is_array() || j[key].empty()) {
    throw_error(path, ": \"", key, "\" must be a non-empty list of lists of integers");
  }
  const auto& rows = j[key];
  if (B == 0) {
    B = static_cast<int>(rows.size());
    T = rows[0].is_array() ? static_cast<int>(rows[0].size()) : 0;
  }
  if (static_cast<int>(rows.size()) != B)
    throw_error(path, ": \"", key, "\" has ", rows.size(), " rows, expected ", B);
  std::vector<std::int32_t> out;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    if (!rows[b].is_array() || static_cast<int>(rows[b].size()) != T || T == 0) {
      throw_error(path, ": \"", key, "\" row ", b, " must have ", T, " integers");
    }
    for (const auto& v : rows[b]) {
      if (!v.is_number_integer())
        throw_error(path, ": \"", key, "\" row ", b, " has a non-integer");
      out.push_back(v.get<std::int32_t>());
    }
  }
  return out;
}

// An embedding model's batch loss (model/contrastive.h), from the batch file's
// "pair_loss": {"loss": "mnrl"|"cosent"|"cosine", "columns": k, "scale": 20, "scores": [...]}:
// the B sequences are k columns of B/k texts (every first text, then every second, ...).
std::function<double()> pair_loss_of(const nlohmann::json& spec, const std::string& path, int B,
                                     int D, Activations& acts) {
  if (!spec.is_object() || !spec.value("loss", nlohmann::json()).is_string()) {
    throw_error(path,
                ": \"pair_loss\" must be {\"loss\": \"mnrl\"|\"cosent\"|\"cosine\", "
                "\"columns\": k, \"scale\": s, \"scores\": [...]}");
  }
  const std::optional<PairLoss> kind = parse_pair_loss(spec["loss"].get<std::string>());
  if (!kind) throw_error(path, ": \"pair_loss\" loss ", spec["loss"].dump(), " is not known");
  const nlohmann::json columns = spec.value("columns", nlohmann::json(2));
  const nlohmann::json scale = spec.value("scale", nlohmann::json(20.0));
  if (!columns.is_number_integer() || columns.get<int>() < 2 || B % columns.get<int>() != 0) {
    throw_error(path, ": \"pair_loss\" columns ", columns.dump(), " must be >= 2 and divide the ",
                B, " sequences");
  }
  if (!scale.is_number()) throw_error(path, ": \"pair_loss\" scale must be a number");
  const int k = columns.get<int>(), n = B / k;
  std::vector<float> scores;
  if (pair_loss_scored(*kind)) {
    const nlohmann::json s = spec.value("scores", nlohmann::json());
    if (k != 2 || !s.is_array() || static_cast<int>(s.size()) != n) {
      throw_error(path, ": \"pair_loss\" ", pair_loss_name(*kind), " needs 2 columns and ", n,
                  " \"scores\"");
    }
    for (const auto& v : s) {
      if (!v.is_number()) throw_error(path, ": \"pair_loss\" scores must be numbers");
      scores.push_back(v.get<float>());
    }
  }
  const double sc = scale.get<double>();
  return [kind = *kind, sc, k, n, D, scores, &acts] {
    const PairBatch p{acts.logits.data(), n, k, D, scores.empty() ? nullptr : scores.data()};
    return pair_loss(kind, sc, p, 1.0f, acts.dlogits.data());
  };
}

void run(const ForwardOptions& o) {
  if (o.compute.threads > 0) set_num_threads(o.compute.threads);
  const Precision precision = runnable_precision(o.compute.precision);
  if (precision == Precision::kInt8 && (o.train_mode || !o.grads_path.empty())) {
    throw_error("--precision int8 is for inference: no --grads or --train-mode with it");
  }
  ModelState state =
      load_model(resolve_model_flag(o.model_dir, o.revision), {.require_head = true});
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(o.batch_path));
  } catch (const nlohmann::json::exception& e) {
    throw_error(o.batch_path, ": invalid JSON (", e.what(), ")");
  }
  int B = 0, T = 0;
  auto ids = read_matrix(j, "input_ids", o.batch_path, B, T);
  std::vector<std::int32_t> mask(ids.size(), 1), types(ids.size(), 0);
  if (j.contains("attention_mask")) mask = read_matrix(j, "attention_mask", o.batch_path, B, T);
  if (j.contains("token_type_ids")) types = read_matrix(j, "token_type_ids", o.batch_path, B, T);
  const ModelConfig& c = state.config;
  if (T > c.max_tokens())
    throw_error(o.batch_path, ": sequence length ", T, " exceeds the ", c.max_tokens(),
                " tokens the model's max_position_embeddings (", c.max_positions, ") hold");
  for (auto id : ids) {
    if (id < 0 || id >= c.vocab_size)
      throw_error(o.batch_path, ": token id ", id, " outside the vocabulary [0, ", c.vocab_size,
                  ")");
  }
  for (auto t : types) {
    if (t < 0 || (c.token_types() && t >= c.type_vocab_size))
      throw_error(o.batch_path, ": token type id ", t, " out of range");
  }
  BertModel model(c, state.layout, precision);
  Activations acts;
  ModelInput in{B, T, ids.data(), types.data(), mask.data()};
  in.for_backward = !o.grads_path.empty();
  DropoutState dropout{.train = o.train_mode, .seed = static_cast<std::uint64_t>(o.seed)};
  ModelWeights weights = model.make_weights();
  weights.prepare(state.params.data(), /*with_backward=*/in.for_backward || dropout.train);
  model.forward(weights, in, dropout, acts);
  const int K = model_head(c).output_width(c);            // labels, or an embedding's size
  const bool tokens = model_head(c).outputs_per_token();  // logits and labels per token
  nlohmann::json out;
  out["logits"] = nlohmann::json::array();
  for (int b = 0; b < B; ++b) {
    if (!tokens) {
      out["logits"].push_back(
          std::vector<float>(acts.logits.data() + b * K, acts.logits.data() + (b + 1) * K));
      continue;
    }
    nlohmann::json row = nlohmann::json::array();  // a token classifier: (T,K) per sequence
    for (int t = 0; t < T; ++t) {
      const float* l = acts.logits.data() + (std::int64_t{b} * T + t) * K;
      row.push_back(std::vector<float>(l, l + K));
    }
    out["logits"].push_back(std::move(row));
  }
  if (j.contains("labels") && model_head(c).label_count(c, B, T) == 0) {
    throw_error(o.batch_path, ": \"labels\" given, but a ", head_kind_noun(c.head),
                " takes no labels (it has no per-example loss; \"pair_loss\" takes a loss over "
                "the batch's embeddings)");
  }
  std::function<double()> loss;  // with acts.dlogits
  if (j.contains("pair_loss")) loss = pair_loss_of(j["pair_loss"], o.batch_path, B, K, acts);
  if (j.contains("labels")) {
    if (!j["labels"].is_array() || static_cast<int>(j["labels"].size()) != B) {
      throw_error(o.batch_path, ": \"labels\" must have ", B, " entries");
    }
    std::vector<float> labels;
    const bool multi = c.problem() == ProblemType::kMultiLabel;
    auto number = [&](const nlohmann::json& v) {
      if (!v.is_number()) throw_error(o.batch_path, ": \"labels\" must hold numbers");
      return v.get<float>();
    };
    auto class_id = [&](const nlohmann::json& v) {
      const float l = number(v);
      if (l != static_cast<int>(l) || l < 0 || l >= K) {
        throw_error(o.batch_path, ": label ", v.dump(), " is not a class id in [0, ", K, ")");
      }
      return l;
    };
    int labelled = 0;
    std::int64_t row = 0;  // the sequence of v
    for (const auto& v : j["labels"]) {
      if (tokens) {
        // a token classifier: a row of T class ids per sequence, -100 where no label applies
        if (!v.is_array() || static_cast<int>(v.size()) != T) {
          throw_error(o.batch_path, ": a token classifier needs each label as a row of ", T,
                      " class ids (-100: none), got ", v.dump());
        }
        for (int t = 0; t < T; ++t) {
          const nlohmann::json& x = v[t];
          const bool ignored = x.is_number() && x.get<float>() == kIgnoredLabel;
          // Padding has no logits of its own here (the forward skips it): as transformers' data
          // collator does, its label must be -100.
          if (!ignored && mask[row * T + t] == 0) {
            throw_error(o.batch_path, ": sequence ", row, " has the label ", x.dump(), " on token ",
                        t, ", which is padding (attention_mask 0); give -100 there");
          }
          labels.push_back(ignored ? kIgnoredLabel : class_id(x));
          labelled += !ignored;
        }
        ++row;
        continue;
      }
      if (multi) {
        // multi-label: a multi-hot row of K numbers in [0, 1] per sequence
        if (!v.is_array() || static_cast<int>(v.size()) != K) {
          throw_error(o.batch_path, ": problem_type multi_label_classification needs each label ",
                      "as a row of ", K, " numbers in [0, 1], got ", v.dump());
        }
        for (const auto& x : v) {
          const float l = number(x);
          if (!(l >= 0 && l <= 1))
            throw_error(o.batch_path, ": multi-hot label ", l, " not in [0, 1]");
          labels.push_back(l);
        }
        continue;
      }
      const float l = number(v);
      if (!std::isfinite(l)) throw_error(o.batch_path, ": label ", v.dump(), " is not finite");
      labels.push_back(c.is_regression() ? l : class_id(v));
    }
    if (tokens && labelled == 0) {
      throw_error(o.batch_path, ": every token's label is -100: no loss to compute");
    }
    loss = [&model, &acts, labels] { return model.loss(labels.data(), 1.0f, acts); };
  }
  if (loss) {
    out["loss"] = loss();
    if (!o.grads_path.empty()) {
      AlignedBuffer<float> grads(state.layout.total());
      model.backward(weights, grads.data(), in, dropout, acts);
      std::vector<TensorToWrite> tensors;
      for (const ParamEntry& e : state.layout.entries()) {
        tensors.push_back({e.name, SafetensorsDType::kF32, e.shape, grads.data() + e.offset});
      }
      write_safetensors(o.grads_path, tensors);
    }
  } else if (!o.grads_path.empty()) {
    throw_error("--grads needs \"labels\" (or an embedding model's \"pair_loss\") in ",
                o.batch_path);
  }
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace

void add_forward_command(CLI::App& app) {
  auto o = std::make_shared<ForwardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "forward",
      "One forward pass on a JSON batch (input_ids, attention_mask, token_type_ids, "
      "optional labels); prints logits and loss. For parity checks.");
  add_flags(*cmd, model_flags(o->model_dir, o->revision));
  add_flags(*cmd,
            {{"--batch",
              "Batch file (JSON, torch_peer.py's format: input_ids, attention_mask, "
              "token_type_ids, labels; an embedding model's \"pair_loss\": {\"loss\": "
              "mnrl|cosent|cosine, \"columns\": k, \"scale\": s, \"scores\": [...]} with the "
              "sequences as k columns)",
              &o->batch_path},
             {"--train-mode", "Dropout on (as the config sets it)", &o->train_mode},
             {"--grads", "Write d loss / d parameter for every parameter to this safetensors file",
              &o->grads_path},
             {"--seed", "Dropout seed in train mode", &o->seed}});
  add_flags(*cmd, select_flags(compute_flags(o->compute), {"--precision", "--threads"}));
  cmd->get_option("--model")->required();
  cmd->get_option("--batch")->required();
  cmd->callback([o] { run(*o); });
}

}  // namespace bertfit::cli
