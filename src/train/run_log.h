// What a training run reports: metrics.jsonl (one JSON record per line, appended and flushed
// as it goes), the same values as TensorBoard scalars when a folder is given (report/), and the
// progress line on stderr (redrawn in place on a terminal, plain lines otherwise). Only rank 0 of
// a distributed run has one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "report/tensorboard.h"

namespace bertfit {

class RunLog {
 public:
  // tensorboard_dir: empty for none; else a new event file there (a resumed run adds one).
  explicit RunLog(const std::string& metrics_path, const std::string& tensorboard_dir = "");
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  void record(const nlohmann::json& j);
  void progress(std::int64_t step, std::int64_t total, double loss, double lr, double rate,
                double eta_seconds);
  void end_progress();  // finishes a redrawn progress line before other output

 private:
  std::FILE* file_;
  std::unique_ptr<report::EventWriter> tensorboard_;
  bool tty_ = false;
  bool open_line_ = false;
};

std::string format_duration(double seconds);  // h:mm:ss, "?" when unknown

}  // namespace bertfit
