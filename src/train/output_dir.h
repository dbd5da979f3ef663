// Where a command writes its output folder, so that nothing a user has is overwritten by
// accident and a folder never mixes two runs:
//   - a folder that already holds a model, a checkpoint or metrics (an "occupied" folder) is
//     refused unless --overwrite-output-dir is given, or the run resumes from a checkpoint
//     inside it (it then continues that run in place);
//   - the output may never be the input model;
//   - with --overwrite-output-dir over an occupied folder the new contents are written to
//     OUTPUT.partial and swapped in whole by commit(): until then OUTPUT is untouched, and a
//     run that fails midway leaves OUTPUT.partial (with its checkpoint, to resume from);
//   - a run that fails before writing anything worth keeping removes the folder it created.
#pragma once

#include <string>

namespace bertfit {

// True when dir holds config.json, model.safetensors, metrics.jsonl or a checkpoint folder.
bool is_occupied_output(const std::string& dir);

class OutputDir {
 public:
  // Throws Error naming the flag: output is the input model, or occupied without `overwrite`
  // (and not the folder the run resumes from). `input_model` and `resume_from` may be "".
  // `resumable`: the folder may hold a training run (the error then mentions --resume).
  OutputDir(std::string output, bool overwrite, const std::string& input_model,
            const std::string& resume_from, bool resumable = true);
  ~OutputDir();  // a folder that was never committed and holds nothing to keep is removed
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // The folder to write into: the output, or its staging folder. Created by create().
  const std::string& path() const { return path_; }
  bool staged() const { return path_ != output_; }
  void create();
  // Marks the folder as holding something to keep even if commit() never comes (e.g. a
  // checkpoint): it then survives a failure.
  void keep() { keep_ = true; }
  // Installs the staged folder in place of the output (a no-op when writing in place).
  void commit();

 private:
  std::string output_, path_;
  bool created_ = false, keep_ = false, committed_ = false;
};

}  // namespace bertfit
