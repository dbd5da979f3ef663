// metrics.jsonl and the progress line.
#include "train/run_log.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include "base/error.h"
#include "report/report.h"

namespace bertfit {

RunLog::RunLog(const std::string& path, const std::string& tensorboard_dir)
    : file_(std::fopen(path.c_str(), "a")) {
  if (file_ == nullptr) throw_error(path, ": cannot open for appending");
  tty_ = ::isatty(2) != 0;
  if (!tensorboard_dir.empty()) {
    tensorboard_ = std::make_unique<report::EventWriter>(tensorboard_dir);
  }
}

RunLog::~RunLog() {
  end_progress();
  std::fclose(file_);
}

void RunLog::record(const nlohmann::json& j) {
  std::string line = j.dump() + "\n";
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
  if (tensorboard_) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    report::write_tensorboard_record(*tensorboard_, j, now);
  }
}

void RunLog::progress(std::int64_t step, std::int64_t total, double loss, double lr, double rate,
                      double eta_seconds) {
  std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  lr %.3g  %.1f samples/s  ETA %s%s",
               tty_ ? "\r" : "", static_cast<long long>(step), static_cast<long long>(total), loss,
               lr, rate, format_duration(eta_seconds).c_str(), tty_ ? "   " : "\n");
  std::fflush(stderr);
  open_line_ = tty_;
}

void RunLog::end_progress() {
  if (open_line_) std::fputc('\n', stderr);
  open_line_ = false;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

}  // namespace bertfit
