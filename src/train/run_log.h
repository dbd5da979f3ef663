// What a training run reports: metrics.jsonl (one JSON record per line, appended and flushed
// as it goes) and the progress line on stderr (redrawn in place on a terminal, plain lines
// otherwise). Only rank 0 of a distributed run has one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace bertfit {

class RunLog {
 public:
  explicit RunLog(const std::string& metrics_path);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  void record(const nlohmann::json& j);
  void progress(std::int64_t step, std::int64_t total, double loss, double lr, double rate,
                double eta_seconds);
  void end_progress();  // finishes a redrawn progress line before other output

 private:
  std::FILE* file_;
  bool tty_ = false;
  bool open_line_ = false;
};

std::string format_duration(double seconds);  // h:mm:ss, "?" when unknown

}  // namespace bertfit
