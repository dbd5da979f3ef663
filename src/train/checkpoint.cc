// Checkpoint writing (atomic folder swap) and reading.
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

}  // namespace bertfit
