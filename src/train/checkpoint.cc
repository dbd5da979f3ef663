// Checkpoint writing (atomic folder swap) and reading; the step shape of a resumed run.
#include "train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/error.h"
#include "base/file.h"
#include "io/safetensors.h"

namespace bertfit {
namespace fs = std::filesystem;
namespace {

// "a, b or c".
std::string word_list(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  }
  return out;
}

std::string ranks(std::int64_t n) { return cat(n, n == 1 ? " rank" : " ranks"); }

// Up to four shapes that take `per_rank` samples on each rank, the largest batch first.
std::string shapes_for(std::int64_t per_rank) {
  std::vector<std::string> ways;
  for (std::int64_t b = per_rank; b >= 1 && ways.size() < 4; --b) {
    if (per_rank % b == 0) ways.push_back(cat("--batch-size ", b, " --grad-accum ", per_rank / b));
  }
  return word_list(ways);
}

// Up to eight rank counts that share `global` samples evenly.
std::string rank_counts_for(std::int64_t global) {
  std::vector<std::string> counts;
  for (std::int64_t n = 1; n <= global && counts.size() < 8; ++n) {
    if (global % n == 0) counts.push_back(std::to_string(n));
  }
  return word_list(counts);
}

}  // namespace

namespace {

// Installs the complete folder `tmp` as `final_dir`: final -> .old, tmp -> final. Returns the
// .old folder (the previous contents; "" if there were none), which the caller removes or keeps.
std::string install_folder(const std::string& tmp, const std::string& final_dir) {
  const std::string old_dir = final_dir + ".old";
  std::error_code ec;
  fs::remove_all(old_dir, ec);
  bool had_old = false;
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old_dir, ec);
    if (ec) throw_error(final_dir, ": cannot move aside the previous one (", ec.message(), ")");
    had_old = true;
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw_error(final_dir, ": cannot install the new one (", ec.message(), ")");
  return had_old ? old_dir : "";
}

// The step of a checkpoint folder's trainer_state.json, or -1 when unreadable.
std::int64_t checkpoint_step(const std::string& dir) {
  const std::string path = join_path(dir, "trainer_state.json");
  if (!path_exists(path)) return -1;
  nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("step") && j["step"].is_number_integer()
             ? j["step"].get<std::int64_t>()
             : -1;
}

// Keeps the previous checkpoint as checkpoint-STEP and removes the oldest of those beyond
// keep - 1 (keep 0: none removed).
void rotate_checkpoints(const std::string& output_dir, const std::string& previous,
                        std::int64_t keep) {
  std::error_code ec;
  const std::int64_t step = checkpoint_step(previous);
  if (keep == 1 || step < 0) {
    fs::remove_all(previous, ec);
    return;
  }
  // A resumed run passes the steps of the checkpoints it started behind again.
  const std::string kept = join_path(output_dir, cat("checkpoint-", step));
  fs::remove_all(kept, ec);
  fs::rename(previous, kept, ec);
  if (ec) throw_error(previous, ": cannot keep it as checkpoint-", step, " (", ec.message(), ")");
  if (keep == 0) return;
  std::vector<std::pair<std::int64_t, fs::path>> older;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint-", 0) != 0) continue;
    const std::string digits = name.substr(11);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    older.emplace_back(std::stoll(digits), entry.path());
  }
  std::sort(older.begin(), older.end());
  for (std::size_t i = 0; i + (keep - 1) < older.size(); ++i) fs::remove_all(older[i].second, ec);
}

}  // namespace

void save_checkpoint(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, const AdamW& optimizer,
                     const nlohmann::json& trainer_state, std::int64_t keep) {
  const std::string tmp_dir = join_path(output_dir, "checkpoint.tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  save_model(tmp_dir, state, vocab_source);
  const std::int64_t n = state.layout.total();
  write_safetensors(join_path(tmp_dir, "optimizer.safetensors"),
                    {{"adam.m", SafetensorsDType::kF32, Shape{n}, optimizer.m().data()},
                     {"adam.v", SafetensorsDType::kF32, Shape{n}, optimizer.v().data()}});
  write_file_atomic(join_path(tmp_dir, "trainer_state.json"), trainer_state.dump(2) + "\n");
  const std::string previous = install_folder(tmp_dir, join_path(output_dir, "checkpoint"));
  if (!previous.empty()) rotate_checkpoints(output_dir, previous, keep);
}

void save_best_model(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, std::int64_t step) {
  const std::string tmp_dir = join_path(output_dir, "best.tmp");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  save_model(tmp_dir, state, vocab_source);
  write_file_atomic(join_path(tmp_dir, "best_step.json"),
                    nlohmann::json{{"step", step}}.dump() + "\n");
  const std::string previous = install_folder(tmp_dir, join_path(output_dir, "best"));
  if (!previous.empty()) fs::remove_all(previous, ec);
}

void load_best_params(const std::string& output_dir, std::int64_t step, ModelState& state) {
  const std::string dir = join_path(output_dir, "best");
  const std::string info = join_path(dir, "best_step.json");
  nlohmann::json j =
      path_exists(info) ? nlohmann::json::parse(read_file(info), nullptr, false) : nlohmann::json();
  if (!j.is_object() || j.value("step", std::int64_t{-1}) != step) {
    throw_error(dir, ": expected the model of the best evaluation (step ", step, ") there, found ",
                j.is_object() ? cat("step ", j.value("step", -1)) : "none",
                "; the final model was not written");
  }
  ModelState best = load_model(dir, {.config = &state.config});
  CHECK(best.layout.total() == state.layout.total(), "best model layout");
  std::copy(best.params.data(), best.params.data() + best.layout.total(), state.params.data());
}

std::string find_checkpoint(const std::string& dir) {
  for (const std::string& candidate :
       {dir, join_path(dir, "checkpoint"), join_path(dir, "checkpoint.old")}) {
    if (path_exists(join_path(candidate, "trainer_state.json"))) return candidate;
  }
  throw_error("--resume ", dir, ": no checkpoint there (expected trainer_state.json in it or in ",
              join_path(dir, "checkpoint"), ")");
}

nlohmann::json load_checkpoint_state(const std::string& dir, AdamW& optimizer) {
  const std::string path = join_path(dir, "optimizer.safetensors");
  SafetensorsFile f = SafetensorsFile::open(path);
  for (auto [name, buffer] : {std::pair{"adam.m", &optimizer.m()}, {"adam.v", &optimizer.v()}}) {
    const TensorInfo* t = f.find(name);
    if (t == nullptr) throw_error(path, ": tensor ", name, " is missing");
    if (t->shape != Shape{static_cast<std::int64_t>(buffer->size())}) {
      throw_error(path, ": tensor ", name, " has shape ", t->shape.str(), ", the model needs [",
                  buffer->size(), "]");
    }
    f.read_f32(*t, buffer->data());
  }
  nlohmann::json state = read_trainer_state(dir);
  optimizer.set_steps_taken(state["step"].get<std::int64_t>());
  return state;
}

nlohmann::json read_trainer_state(const std::string& dir) {
  const std::string state_path = join_path(dir, "trainer_state.json");
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(read_file(state_path));
  } catch (const nlohmann::json::exception& e) {
    throw_error(state_path, ": invalid JSON (", e.what(), ")");
  }
  if (!state.is_object() || !state.contains("step") || !state["step"].is_number_integer()) {
    throw_error(state_path, ": missing integer \"step\"");
  }
  return state;
}

StepShape resume_step_shape(std::int64_t global, StepShape saved, int saved_world, StepShape given,
                            int world, std::string* note) {
  if (std::int64_t{given.batch} * given.accum * world == global) return given;
  // The saved flags are the ones typed: a run that adapted them took another shape.
  const bool typed_shape = std::int64_t{saved.batch} * saved.accum * saved_world == global;
  const std::string was = cat(global, " samples per optimizer step",
                              typed_shape ? cat(" (", ranks(saved_world), " × ", saved.batch, " × ",
                                                saved.accum, " accumulation)")
                                          : std::string());
  if (global % world != 0) {
    throw_error("--resume: the checkpoint's run takes ", was, ", which ", ranks(world),
                " cannot share evenly; resume it on ", rank_counts_for(global), " ranks");
  }
  const std::int64_t per_rank = global / world;
  if (given != saved) {
    throw_error("--resume: --batch-size ", given.batch, " × --grad-accum ", given.accum, " × ",
                ranks(world), " take ", std::int64_t{given.batch} * given.accum * world,
                " samples per optimizer step, but the checkpoint's run takes ", was,
                "; to keep it on ", ranks(world), " give ", shapes_for(per_rank));
  }
  StepShape shape;
  if (per_rank % given.batch == 0) {
    shape = {given.batch, static_cast<int>(per_rank / given.batch)};
  } else if (per_rank % given.accum == 0) {
    shape = {static_cast<int>(per_rank / given.accum), given.accum};
  } else {
    std::int64_t b = given.batch;
    while (per_rank % b != 0) --b;
    shape = {static_cast<int>(b), static_cast<int>(per_rank / b)};
  }
  *note = cat("the checkpoint's run takes ", was, "; on ", ranks(world), " that is --batch-size ",
              shape.batch, " --grad-accum ", shape.accum);
  return shape;
}

}  // namespace bertfit
