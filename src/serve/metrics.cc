// Prometheus text rendering of the server metrics (see metrics.h).
#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <tuple>

namespace bertfit::serve {
namespace {

std::vector<double> seconds_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

std::vector<double> powers_of_two(double last) {
  std::vector<double> b;
  for (double v = 1; v <= last; v *= 2) b.push_back(v);
  return b;
}

// TEI's duration buckets: 35 steps of x1.5 from 1.5e-5 s.
std::vector<double> tei_duration_buckets() {
  std::vector<double> b;
  double v = 0.00001;
  for (int i = 0; i < 35; ++i) b.push_back(v *= 1.5);
  return b;
}

std::vector<double> tei_powers_of_two(int count) {
  std::vector<double> b;
  for (int i = 0; i < count; ++i) b.push_back(static_cast<double>(std::int64_t{1} << i));
  return b;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  if (it != bounds_.end()) ++counts_[it - bounds_.begin()];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : tokenization_(seconds_buckets()),
      queue_(seconds_buckets()),
      inference_(seconds_buckets()),
      request_(seconds_buckets()),
      batch_size_(powers_of_two(4096)),
      batch_tokens_(powers_of_two(65536)),
      input_tokens_(powers_of_two(512)) {}

Histogram& Metrics::te_histogram(const std::string& name) {
  auto it = te_histograms_.find(name);
  if (it != te_histograms_.end()) return it->second;
  std::vector<double> bounds = name == "te_request_input_length" ? tei_powers_of_two(20)
                               : name == "te_batch_next_size"    ? tei_powers_of_two(13)
                               : name == "te_batch_next_tokens"  ? tei_powers_of_two(21)
                                                                 : tei_duration_buckets();
  return te_histograms_.emplace(name, Histogram(std::move(bounds))).first->second;
}

void Metrics::te_request(const std::string& family, std::size_t inputs) {
  std::lock_guard lock(mu_);
  ++te_count_[inputs == 1 ? "single" : "batch"];
  te_family_count_[family] += inputs;
}

void Metrics::te_success(const std::string& family, std::size_t inputs, double total,
                         double tokenization, double queue, double inference) {
  std::lock_guard lock(mu_);
  ++te_success_[inputs == 1 ? "single" : "batch"];
  te_family_success_[family] += inputs;
  const std::pair<const char*, double> parts[] = {{"duration", total},
                                                  {"tokenization_duration", tokenization},
                                                  {"queue_duration", queue},
                                                  {"inference_duration", inference}};
  for (const auto& [part, seconds] : parts) {
    te_histogram(std::string("te_request_") + part).observe(seconds);
    Histogram& per_input = te_histogram("te_" + family + "_" + part);
    for (std::size_t i = 0; i < inputs; ++i) per_input.observe(seconds);
  }
}

void Metrics::request(const std::string& route, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
}
void Metrics::rejection(const std::string& reason, int status) {
  std::lock_guard lock(mu_);
  ++rejections_[{reason, status}];
  if (status > 0) ++te_failure_[reason];
}
void Metrics::tokenization(double s) {
  std::lock_guard lock(mu_);
  tokenization_.observe(s);
}
void Metrics::queue(double s) {
  std::lock_guard lock(mu_);
  queue_.observe(s);
}
void Metrics::inference(double s) {
  std::lock_guard lock(mu_);
  inference_.observe(s);
}
void Metrics::batch(std::int64_t sequences, std::int64_t tokens) {
  std::lock_guard lock(mu_);
  batch_size_.observe(static_cast<double>(sequences));
  batch_tokens_.observe(static_cast<double>(tokens));
  te_histogram("te_batch_next_size").observe(static_cast<double>(sequences));
  te_histogram("te_batch_next_tokens").observe(static_cast<double>(tokens));
}
void Metrics::input_tokens(std::int64_t tokens) {
  std::lock_guard lock(mu_);
  input_tokens_.observe(static_cast<double>(tokens));
  te_histogram("te_request_input_length").observe(static_cast<double>(tokens));
}
void Metrics::request_duration(double s) {
  std::lock_guard lock(mu_);
  request_.observe(s);
}
void Metrics::set_queue_size(std::int64_t n) {
  std::lock_guard lock(mu_);
  queue_size_ = n;
}
void Metrics::set_in_flight(std::int64_t n) {
  std::lock_guard lock(mu_);
  in_flight_ = n;
}

std::string Metrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  header(out, "bertfit_requests_total", "counter", "HTTP requests answered, by route and status");
  for (const auto& [key, n] : requests_) {
    out += "bertfit_requests_total{route=\"" + key.first + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  header(out, "bertfit_rejections_total", "counter",
         "Requests refused and connections closed unanswered (status none), by reason");
  for (const auto& [key, n] : rejections_) {
    out += "bertfit_rejections_total{reason=\"" + key.first + "\",status=\"" +
           (key.second > 0 ? std::to_string(key.second) : std::string("none")) + "\"} " +
           std::to_string(n) + "\n";
  }
  const std::pair<const Histogram*, const char*> histograms[] = {
      {&tokenization_, "bertfit_tokenization_seconds"},
      {&queue_, "bertfit_queue_seconds"},
      {&inference_, "bertfit_inference_seconds"},
      {&request_, "bertfit_request_seconds"},
      {&batch_size_, "bertfit_batch_size"},
      {&batch_tokens_, "bertfit_batch_tokens"},
      {&input_tokens_, "bertfit_input_tokens"},
  };
  const char* helps[] = {"Time to tokenize one input",
                         "Time one input waited for the compute worker",
                         "Time of one batch's forward passes",
                         "Time from a /predict request's arrival to its answer",
                         "Sequences per batch",
                         "Real tokens per batch",
                         "Tokens per input after truncation"};
  for (std::size_t i = 0; i < std::size(histograms); ++i) {
    header(out, histograms[i].second, "histogram", helps[i]);
    histograms[i].first->render(out, histograms[i].second);
  }
  header(out, "bertfit_queue_size", "gauge", "Sequences waiting for the compute worker");
  out += "bertfit_queue_size " + std::to_string(queue_size_) + "\n";
  header(out, "bertfit_in_flight_requests", "gauge", "Requests being processed");
  out += "bertfit_in_flight_requests " + std::to_string(in_flight_) + "\n";
  // TEI's names (as its Prometheus exporter writes them: counters without _total).
  const std::tuple<const char*, const char*, const std::map<std::string, std::uint64_t>*>
      counters[] = {{"te_request_count", "method", &te_count_},
                    {"te_request_success", "method", &te_success_},
                    {"te_request_failure", "err", &te_failure_}};
  for (const auto& [name, label, values] : counters) {
    header(out, name, "counter", "TEI's request counter");
    for (const auto& [value, n] : *values) {
      out += std::string(name) + "{" + label + "=\"" + value + "\"} " + std::to_string(n) + "\n";
    }
  }
  for (const char* family : {"embed", "predict"}) {
    for (const auto& [suffix, values] :
         std::initializer_list<std::pair<const char*, const std::map<std::string, std::uint64_t>*>>{
             {"count", &te_family_count_}, {"success", &te_family_success_}}) {
      const std::string name = std::string("te_") + family + "_" + suffix;
      header(out, name, "counter", "TEI's per-input counter");
      const auto it = values->find(family);
      out += name + " " + std::to_string(it == values->end() ? 0 : it->second) + "\n";
    }
  }
  for (const auto& [name, histogram] : te_histograms_) {
    header(out, name, "histogram", "TEI's histogram");
    histogram.render(out, name);
  }
  header(out, "te_queue_size", "gauge", "Sequences waiting for the compute worker (TEI's name)");
  out += "te_queue_size " + std::to_string(queue_size_) + "\n";
  return out;
}

}  // namespace bertfit::serve
