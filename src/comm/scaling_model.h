// A model of data-parallel step time on N nodes (`bertfit bench scaling`): one node's measured
// compute per step plus what the gradient all-reduce adds, from the bytes, the link's bandwidth
// and latency, and how much of it bertfit hides behind backward. Knows bytes, not models: the
// caller gives the gradient's size and its row-sparse head (the word embeddings, of which only
// the rows a step touched travel: comm/grad_reducer.h).
//
// Per step on N nodes (ring all-reduce, which Open MPI's non-blocking all-reduce uses here:
// comm/mpi_runtime.cc; each of the 2(N-1) rounds of every bucket pays the latency once):
//   bytes_dense = (params - rows * width) * wire bytes;   head = touched(N) * width * wire bytes
//   touched(N)  = min(rows, touched_rows_per_node * N^touched_exponent)   (the rows N nodes'
//                 batches touch together: Heaps' law; exponent 1 is the upper bound where no
//                 two nodes share a token; MRPC's batches of 32 fit 0.66)
//   flags       = rows * 4 bytes (the touched-row flags, started before backward: hidden)
//   ar(b)       = 2 (N-1)/N * b / bandwidth + 2 (N-1) * latency * ceil(b / bucket)
//   hidden      = min(overlap * ar(bytes_dense), backward_fraction * compute)
//   exposed     = ar(bytes_dense) - hidden + ar(head)     (the head is the last bucket: never
//                                                           hidden)
//   cpu         = comm_cpu_core_s_per_gb * traffic_gb / cores_per_node   (communication CPU
//                 taken from compute; 0 for RDMA, which moves bytes without the CPU)
//   step        = compute + exposed + cpu;   speedup = N * compute / step
#pragma once

#include <cstdint>
#include <vector>

namespace bertfit {

struct ScalingInputs {
  double compute_s = 0;                    // one node's step (forward, backward, update), no comm
  double backward_fraction = 0.6;          // share of compute_s in backward (where buckets hide)
  std::int64_t params = 0;                 // gradient length (floats)
  std::int64_t head_rows = 0;              // row-sparse head (0: none): rows x width floats
  std::int64_t head_width = 0;             // ... of params
  std::int64_t touched_rows_per_node = 0;  // head rows one node's batch touches per step
  double touched_exponent = 1;             // growth of the touched rows with nodes (<= 1)
  double wire_bytes = 4;                   // 4 (fp32) or 2 (bf16 on the wire)
  double bucket_bytes = 8e6;               // --bucket-mb
  double link_gbit = 25;                   // per-node link, Gbit/s
  double latency_us = 30;                  // one message's latency
  double overlap = 1;                 // fraction of the dense all-reduce that backward can hide
  double comm_cpu_core_s_per_gb = 0;  // CPU per GB a rank sends and receives
  double cores_per_node = 1;          // cores the compute runs on
};

struct ScalingPoint {
  int nodes = 1;
  double allreduce_s = 0;  // the whole all-reduce (dense + head), alone on the link
  double exposed_s = 0;    // the part of it the step waits for
  double comm_cpu_s = 0;   // communication CPU charged to the step
  double step_s = 0;
  double speedup = 1;
  double efficiency = 1;
  double payload_mb = 0;  // bytes a rank contributes (dense + touched head rows)
};

// Throws Error naming the input, by its `bertfit bench scaling` flag, when one is out of range
// (negative times, overlap outside [0, 1], ...).
ScalingPoint predict_scaling(const ScalingInputs& in, int nodes);
std::vector<ScalingPoint> predict_scaling(const ScalingInputs& in, const std::vector<int>& nodes);

}  // namespace bertfit
