// The output-folder policy (see output_dir.h).
#include "train/output_dir.h"

#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"

namespace bertfit {
namespace fs = std::filesystem;

namespace {

fs::path normal(const std::string& path) {
  std::error_code ec;
  fs::path n = fs::weakly_canonical(fs::absolute(path), ec);
  return n.has_filename() ? n : n.parent_path();  // "dir/" -> "dir"
}

// The same folder, whichever way its path is spelled (relative, trailing slash, symlinks).
bool same_folder(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  if (fs::exists(a, ec1) && fs::exists(b, ec2)) return fs::equivalent(a, b, ec1);
  return normal(a) == normal(b);
}

bool inside(const std::string& path, const std::string& dir) {
  fs::path p = normal(path), d = normal(dir);
  for (; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (p == d) return true;
  }
  return false;
}

std::string trimmed(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

bool is_occupied_output(const std::string& dir) {
  for (const char* name : {"config.json", "model.safetensors", "metrics.jsonl", "checkpoint",
                           "checkpoint.old", "trainer_state.json", "runs", "best"}) {
    if (path_exists(join_path(dir, name))) return true;
  }
  return false;
}

OutputDir::OutputDir(std::string output, bool overwrite, const std::string& input_model,
                     const std::string& resume_from, bool resumable)
    : output_(trimmed(std::move(output))), path_(output_) {
  if (path_exists(output_) && !is_directory(output_)) {
    throw_error("--output ", output_, " exists and is not a folder");
  }
  if (!input_model.empty() && same_folder(output_, input_model)) {
    throw_error("--output ", output_, " is the input model (--model ", input_model,
                "); write to another folder");
  }
  if (!is_occupied_output(output_)) return;
  if (!resume_from.empty() && inside(resume_from, output_)) return;  // continue that run
  if (!overwrite) {
    throw_error("--output ", output_, " already holds a model, checkpoint or metrics; choose ",
                "another folder, ",
                resumable && path_exists(join_path(output_, "checkpoint"))
                    ? cat("resume that run with --resume ", join_path(output_, "checkpoint"), ", ")
                    : std::string(),
                "or pass --overwrite-output-dir to replace it");
  }
  path_ = output_ + ".partial";
  if (!resume_from.empty() && inside(resume_from, path_)) return;  // resume a staged run
  std::error_code ec;
  fs::remove_all(path_, ec);  // a previous staged attempt that was not resumed
}

void OutputDir::create() {
  created_ = !path_exists(path_);
  make_directories(path_);
}

void OutputDir::commit() {
  committed_ = true;
  if (!staged()) return;
  const std::string old = output_ + ".old";
  std::error_code ec;
  fs::remove_all(old, ec);
  fs::rename(output_, old, ec);
  if (ec) throw_error(output_, ": cannot move the previous output aside (", ec.message(), ")");
  fs::rename(path_, output_, ec);
  if (ec) {
    std::error_code back;
    fs::rename(old, output_, back);
    throw_error(output_, ": cannot install the new output from ", path_, " (", ec.message(), ")");
  }
  fs::remove_all(old, ec);
  path_ = output_;
}

OutputDir::~OutputDir() {
  if (committed_ || keep_ || !created_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace bertfit
