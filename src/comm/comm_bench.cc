// Communication benchmarks, run under mpirun (2+ ranks):
//   comm_bench overlap [--mb 66] [--buckets 16] [--compute-ms 8] [--rounds 6]
//                           [--progress-calls 1] [--wire f32|bf16] [--polls 0,50,200]
//     For each progress configuration (test between layers; a comm thread per poll interval):
//     a GradReducer over a buffer of --mb MB in --buckets buckets, with --compute-ms of
//     single-threaded compute (a register-bound multiply-add loop) before each bucket is
//     declared ready, split by --progress-calls progress() calls (the trainer calls progress()
//     between layers). Prints medians of the step time, the overhead over the same compute
//     without communication, and the exposed wait in finish().
//   comm_bench bandwidth [--max-mb 64]
//     Rank 0 <-> rank 1 transfer rate (a 2-rank broadcast is one message) and all-reduce time
//     per size; used to check the link shaping of scripts/cluster.
//   comm_bench topology
//     Each rank prints its host, local rank and the CPU share comm/topology gives it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "comm/topology.h"

namespace bertfit {
namespace {

double arg(int argc, char** argv, const char* name, double fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  }
  return fallback;
}

std::string arg_text(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

// Register-bound work: `units` passes of a multiply-add over 256 floats.
float g_sink = 0;
void compute(std::int64_t units) {
  float acc[256];
  for (int j = 0; j < 256; ++j) acc[j] = static_cast<float>(j) * 1e-3f;
  for (std::int64_t u = 0; u < units; ++u) {
    for (int j = 0; j < 256; ++j) acc[j] = acc[j] * 0.999f + 1e-4f;
  }
  for (int j = 0; j < 256; ++j) g_sink += acc[j];
}

// Units of compute per millisecond, from the fastest of several trials (the least disturbed by
// other processes on a shared machine), so that --compute-ms means what it says when the core
// is free.
std::int64_t units_per_ms() {
  compute(20000);  // warm up
  double best = 0;
  for (int trial = 0; trial < 7; ++trial) {
    Timer timer;
    const std::int64_t units = 100000;
    compute(units);
    best = std::max(best, static_cast<double>(units) / (timer.seconds() * 1e3));
  }
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(best));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One progress configuration under test, with its own communicator and reducer.
struct Config {
  std::string name;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<GradReducer> reducer;
  std::vector<double> overhead, waited, step;
};

void overlap(int argc, char** argv) {
  const double mb = arg(argc, argv, "--mb", 66);
  const int buckets = static_cast<int>(arg(argc, argv, "--buckets", 16));
  const double compute_ms = arg(argc, argv, "--compute-ms", 8);
  const int rounds = static_cast<int>(arg(argc, argv, "--rounds", 6));
  const int calls = std::max(1, static_cast<int>(arg(argc, argv, "--progress-calls", 1)));
  const WireDType wire =
      arg_text(argc, argv, "--wire", "f32") == "bf16" ? WireDType::kBF16 : WireDType::kF32;
  const std::string polls = arg_text(argc, argv, "--polls", "0,50,200");
  const auto total = static_cast<std::int64_t>(mb * 1e6 / 4);
  std::vector<std::int64_t> boundaries;
  for (int b = 0; b < buckets; ++b) boundaries.push_back(total * b / buckets);
  std::vector<float> grads(static_cast<std::size_t>(total), 1.0f);
  const std::int64_t units =
      static_cast<std::int64_t>(static_cast<double>(units_per_ms()) * compute_ms / calls);

  // All configurations live side by side (an idle comm thread wakes every 50 ms) and take
  // turns round by round, each step paired with a compute-only pass just before it, so that
  // load from other processes on this shared machine hits every configuration alike.
  std::vector<Config> configs;
  auto add = [&](std::string name, ProgressMode mode, double poll) {
    CommOptions options;
    options.progress = mode;
    options.poll_interval_us = poll;
    Config c{std::move(name), make_communicator(options), nullptr, {}, {}, {}};
    c.reducer = std::make_unique<GradReducer>(
        *c.comm, boundaries, total, static_cast<std::int64_t>(0.9 * mb * 1e6 / buckets), wire);
    configs.push_back(std::move(c));
  };
  add("test between layers", ProgressMode::kTestBetweenLayers, 0);
  for (std::size_t at = 0; at < polls.size();) {
    std::size_t comma = std::min(polls.find(',', at), polls.size());
    double poll = std::atof(polls.substr(at, comma - at).c_str());
    add(cat("comm thread, poll ", poll, " us"), ProgressMode::kCommThread, poll);
    at = comma + 1;
  }
  Communicator& world = *configs[0].comm;
  std::vector<double> comm_alone;
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up connections
    for (std::size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + static_cast<std::size_t>(round)) % configs.size()];
      world.barrier();
      Timer alone_timer;
      for (int b = 0; b < buckets * calls; ++b) compute(units);
      double alone = alone_timer.seconds();
      world.barrier();
      Timer step;
      c.reducer->begin_step(grads.data());
      for (std::size_t b = 0; b < c.reducer->buckets().size(); ++b) {
        for (int i = 0; i < calls; ++i) {
          compute(units);
          c.comm->progress();
        }
        c.reducer->ready(c.reducer->buckets()[b].begin);
      }
      double waited = c.reducer->finish(1.0f / static_cast<float>(c.comm->world()));
      double seconds = step.seconds();
      if (round == 0) continue;
      c.overhead.push_back(seconds - alone);
      c.waited.push_back(waited);
      c.step.push_back(seconds);
    }
    world.barrier();
    Timer timer;  // communication with nothing to hide it behind
    configs[0].reducer->begin_step(grads.data());
    configs[0].reducer->finish(1.0f);
    if (round > 0) comm_alone.push_back(timer.seconds());
  }
  // Rank 0 reports; the other ranks' numbers are within noise of it (the step is synchronous).
  if (world.rank() != 0) return;
  std::printf(
      "%.0f MB in %zu buckets, wire %s, %.1f ms of compute before each bucket, %d progress call(s) "
      "per bucket; %d rounds, medians; all-reduce with no compute: %.1f ms\n",
      mb, configs[0].reducer->buckets().size(), wire_dtype_name(wire), compute_ms, calls, rounds,
      median(comm_alone) * 1e3);
  for (const Config& c : configs) {
    std::printf(
        "  %-26s step %7.1f ms  overhead vs compute alone %7.1f ms  exposed wait in finish %7.1f "
        "ms\n",
        c.name.c_str(), median(c.step) * 1e3, median(c.overhead) * 1e3, median(c.waited) * 1e3);
  }
  std::fflush(stdout);
}

void bandwidth(int argc, char** argv) {
  const double max_mb = arg(argc, argv, "--max-mb", 64);
  auto comm = make_communicator({});
  if (comm->rank() == 0) std::printf("%s\n", describe(*comm).c_str());
  for (double mb = 0.001; mb <= max_mb * 1.0001; mb *= 8) {
    auto bytes = static_cast<std::int64_t>(mb * 1e6);
    std::vector<char> buffer(static_cast<std::size_t>(bytes), 1);
    std::vector<float> floats(static_cast<std::size_t>(bytes / 4), 1.0f);
    const int reps = mb < 1 ? 50 : 5;
    comm->broadcast(buffer.data(), bytes, 0);  // warm up
    comm->barrier();
    Timer timer;
    for (int r = 0; r < reps; ++r) comm->broadcast(buffer.data(), bytes, r % 2);
    comm->barrier();
    double one_way = timer.seconds() / reps;
    timer.reset();
    for (int r = 0; r < reps; ++r)
      comm->allreduce_sum(floats.data(), static_cast<std::int64_t>(floats.size()));
    double reduce = timer.seconds() / reps;
    if (comm->rank() == 0) {
      std::printf("%10.3f MB: broadcast %9.3f ms (%8.2f Gbit/s)  all-reduce %9.3f ms\n", mb,
                  one_way * 1e3, bytes * 8 / one_way / 1e9, reduce * 1e3);
      std::fflush(stdout);
    }
  }
}

void topology() {
  auto comm = make_communicator({});
  CpuShare share = cpu_share(comm->local_rank(), comm->local_world());
  std::vector<int> allowed = allowed_cores();
  std::printf("%s: allowed cores %s, cgroup quota %g cores -> %s\n", describe(*comm).c_str(),
              format_cpu_list(allowed).c_str(), cpu_quota_cores(), describe_share(share).c_str());
}

}  // namespace
}  // namespace bertfit

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "overlap") {
    bertfit::overlap(argc, argv);
  } else if (what == "topology") {
    bertfit::topology();
  } else if (what == "bandwidth") {
    bertfit::bandwidth(argc, argv);
  } else {
    std::fprintf(stderr,
                 "usage: %s overlap|bandwidth|topology [options] (see the comment at the top of "
                 "comm_bench.cc)\n",
                 argv[0]);
    return 2;
  }
  return 0;
}
