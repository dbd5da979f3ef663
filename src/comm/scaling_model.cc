// The data-parallel step-time model: see scaling_model.h for the formulas.
#include "comm/scaling_model.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace bertfit {
namespace {

void check_inputs(const ScalingInputs& in) {
  auto positive = [](const char* name, double v) {
    if (!(v > 0) || !std::isfinite(v)) throw_error(name, " must be a positive number, got ", v);
  };
  auto non_negative = [](const char* name, double v) {
    if (!(v >= 0) || !std::isfinite(v)) throw_error(name, " must be >= 0, got ", v);
  };
  positive("--compute-s", in.compute_s);
  positive("--link-gbit", in.link_gbit);
  positive("--cores-per-node", in.cores_per_node);
  positive("--bucket-mb", in.bucket_bytes);
  non_negative("--latency-us", in.latency_us);
  non_negative("--comm-cpu", in.comm_cpu_core_s_per_gb);
  if (!(in.overlap >= 0 && in.overlap <= 1))
    throw_error("--overlap must be in [0, 1], got ", in.overlap);
  if (!(in.backward_fraction >= 0 && in.backward_fraction <= 1)) {
    throw_error("--backward-fraction must be in [0, 1], got ", in.backward_fraction);
  }
  if (in.params <= 0) throw_error("the gradient must have parameters, got ", in.params);
  if (in.head_rows < 0 || in.head_width < 0 || in.head_rows * in.head_width > in.params) {
    throw_error("the sparse head of ", in.head_rows, " x ", in.head_width,
                " does not fit a gradient of ", in.params);
  }
  if (!(in.touched_exponent >= 0 && in.touched_exponent <= 1)) {
    throw_error("--touched-exponent must be in [0, 1], got ", in.touched_exponent);
  }
  if (in.touched_rows_per_node < 0) {
    throw_error("--touched-rows must be >= 0, got ", in.touched_rows_per_node);
  }
}

}  // namespace

ScalingPoint predict_scaling(const ScalingInputs& in, int nodes) {
  check_inputs(in);
  if (nodes < 1) throw_error("--nodes: a node count must be >= 1, got ", nodes);
  ScalingPoint p;
  p.nodes = nodes;
  const double n = nodes;
  const double head_floats = static_cast<double>(in.head_rows) * in.head_width;
  const double dense_bytes = (static_cast<double>(in.params) - head_floats) * in.wire_bytes;
  const double touched = std::min<double>(
      static_cast<double>(in.head_rows),
      std::round(static_cast<double>(in.touched_rows_per_node) * std::pow(n, in.touched_exponent)));
  const double head_bytes = touched * in.head_width * in.wire_bytes;
  const double flag_bytes = in.head_rows > 0 ? static_cast<double>(in.head_rows) * 4 : 0;
  p.payload_mb = (dense_bytes + head_bytes) / 1e6;
  if (nodes == 1) {
    p.step_s = in.compute_s;
    return p;
  }
  const double bytes_per_s = in.link_gbit * 1e9 / 8;
  const double latency_s = in.latency_us * 1e-6;
  auto allreduce = [&](double bytes) {
    if (bytes <= 0) return 0.0;
    const double rounds = 2 * (n - 1);
    return rounds / n * bytes / bytes_per_s +
           rounds * latency_s * std::ceil(bytes / in.bucket_bytes);
  };
  const double dense = allreduce(dense_bytes), head = allreduce(head_bytes);
  const double hidden = std::min(in.overlap * dense, in.backward_fraction * in.compute_s);
  p.allreduce_s = dense + head;
  p.exposed_s = dense - hidden + head;
  // Each rank sends and receives 2(N-1)/N of every byte it contributes (the flags included).
  const double traffic_gb = 2 * 2 * (n - 1) / n * (dense_bytes + head_bytes + flag_bytes) / 1e9;
  p.comm_cpu_s = in.comm_cpu_core_s_per_gb * traffic_gb / in.cores_per_node;
  p.step_s = in.compute_s + p.exposed_s + p.comm_cpu_s;
  p.speedup = n * in.compute_s / p.step_s;
  p.efficiency = p.speedup / n;
  return p;
}

std::vector<ScalingPoint> predict_scaling(const ScalingInputs& in, const std::vector<int>& nodes) {
  std::vector<ScalingPoint> points;
  for (int n : nodes) points.push_back(predict_scaling(in, n));
  return points;
}

}  // namespace bertfit
