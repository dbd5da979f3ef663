// Checkpoint writing (atomic folder swap) and reading; the step shape of a resumed run.
#include "train/checkpoint.h"

#include <filesystem>
#include <vector>

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
