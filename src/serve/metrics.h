// The server's counters and histograms, rendered in Prometheus' text format (GET /metrics):
// requests by route and status, the time each input spent being tokenized, queued and computed,
// whole-request time, batch sizes (sequences and real tokens per batch) and input lengths, and
// every refusal or timeout by reason and status (0: the connection was closed without an answer).
// Beside them, under TEI 1.9's names and buckets (so TEI's dashboards read bertfit): requests
// te_request_count / _success by method (single: one input, batch: more), te_request_failure by
// err (the refusal's reason), te_request_duration and its tokenization / queue / inference parts
// per request, te_embed_* and te_predict_* (count, success, durations) per input of the
// embedding and the classifier routes, te_request_input_length, te_batch_next_size and
// te_batch_next_tokens per batch, te_queue_size.
// Thread-safe; one mutex, taken briefly per observation.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace bertfit::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size()) {}
  void observe(double v);
  // "name_bucket{le=...} n" lines (cumulative), name_sum and name_count.
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not cumulative
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void request(const std::string& route, int status);
  // A request refused (status 4xx/5xx) or a connection closed unanswered (status 0): a timeout,
  // the connection limit, a descriptor shortage, shutdown.
  void rejection(const std::string& reason, int status);
  void tokenization(double seconds);  // per input
  void queue(double seconds);         // per input: from enqueued to its batch's start
  void inference(double seconds);     // per batch
  void batch(std::int64_t sequences, std::int64_t tokens);
  void input_tokens(std::int64_t tokens);  // per input
  void request_duration(double seconds);   // per answered /predict request
  void set_queue_size(std::int64_t sequences);
  void set_in_flight(std::int64_t requests);
  // TEI's per-request series: a model route's request of `inputs` inputs was admitted
  // (family: "embed" or "predict"), and was answered in total seconds, of which tokenization,
  // queue and inference per input.
  void te_request(const std::string& family, std::size_t inputs);
  void te_success(const std::string& family, std::size_t inputs, double total, double tokenization,
                  double queue, double inference);

  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_, rejections_;
  Histogram tokenization_, queue_, inference_, request_, batch_size_, batch_tokens_, input_tokens_;
  std::int64_t queue_size_ = 0, in_flight_ = 0;
  // TEI's series: counters by label value, histograms by name.
  std::map<std::string, std::uint64_t> te_count_, te_success_, te_failure_, te_family_count_,
      te_family_success_;
  std::map<std::string, Histogram> te_histograms_;
  Histogram& te_histogram(const std::string& name);
};

}  // namespace bertfit::serve
