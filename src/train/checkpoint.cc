// Checkpoint writing (atomic folder swap) and reading.
#include "train/checkpoint.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "io/safetensors.h"

namespace bertfit {
namespace fs = std::filesystem;

void save_checkpoint(const std::string& output_dir, const ModelState& state,
                     const std::string& vocab_source, const AdamW& optimizer,
                     const nlohmann::json& trainer_state) {
  const std::string final_dir = join_path(output_dir, "checkpoint");
  const std::string tmp_dir = join_path(output_dir, "checkpoint.tmp");
  const std::string old_dir = join_path(output_dir, "checkpoint.old");
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  save_model(tmp_dir, state, vocab_source);
  const std::int64_t n = state.layout.total();
  write_safetensors(join_path(tmp_dir, "optimizer.safetensors"),
                    {{"adam.m", SafetensorsDType::kF32, Shape{n}, optimizer.m().data()},
                     {"adam.v", SafetensorsDType::kF32, Shape{n}, optimizer.v().data()}});
  write_file_atomic(join_path(tmp_dir, "trainer_state.json"), trainer_state.dump(2) + "\n");
  // Swap: checkpoint -> checkpoint.old, checkpoint.tmp -> checkpoint, drop checkpoint.old.
  fs::remove_all(old_dir, ec);
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old_dir, ec);
    if (ec)
      throw_error(final_dir, ": cannot move aside the previous checkpoint (", ec.message(), ")");
  }
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) throw_error(final_dir, ": cannot install the new checkpoint (", ec.message(), ")");
  fs::remove_all(old_dir, ec);
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
  const std::string state_path = join_path(dir, "trainer_state.json");
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(read_file(state_path));
  } catch (const nlohmann::json::exception& e) {
    throw_error(state_path, ": invalid JSON (", e.what(), ")");
  }
  if (!state.contains("step") || !state["step"].is_number_integer()) {
    throw_error(state_path, ": missing integer \"step\"");
  }
  optimizer.set_steps_taken(state["step"].get<std::int64_t>());
  return state;
}

}  // namespace bertfit
