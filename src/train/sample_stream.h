// The run's sample stream: the examples epoch after epoch, each epoch in the order
// epoch_order(n, seed, epoch, shuffle); sample g of the run is row order_{g / n}[g % n]. It
// depends only on (n, seed, shuffle) and the grouping below, so every rank and every resumed
// run sees the same stream, and a position in it is just a sample count.
//
// Length grouping (--group-by-length, HF's LengthGroupedSampler idea): each epoch's order is
// cut into runs of `group` samples (50 optimizer steps' worth) and each run is sorted by length,
// longest first (stable, so ties keep the shuffled order). Consecutive batches then hold
// examples of similar length and dynamic padding pads little; which examples share an epoch
// and roughly when they are seen stays random.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "data/shuffle.h"

namespace bertfit {

class SampleStream {
 public:
  SampleStream(std::int64_t n, std::uint64_t seed, bool shuffle)
      : n_(n), seed_(seed), shuffle_(shuffle) {}
  // Grouped: lengths[i] is example i's length; group > 0 samples per sorted run.
  SampleStream(std::int64_t n, std::uint64_t seed, bool shuffle, std::vector<int> lengths,
               std::int64_t group)
      : n_(n), seed_(seed), shuffle_(shuffle), lengths_(std::move(lengths)), group_(group) {}

  std::int64_t row(std::int64_t g) {
    const std::int64_t epoch = g / n_;
    auto it = orders_.find(epoch);
    if (it == orders_.end()) {
      if (orders_.size() > 2) orders_.erase(orders_.begin());  // only neighbours are reused
      it = orders_.emplace(epoch, make_order(epoch)).first;
    }
    return it->second[g % n_];
  }

 private:
  std::vector<std::int64_t> make_order(std::int64_t epoch) const {
    std::vector<std::int64_t> order = epoch_order(n_, seed_, epoch, shuffle_);
    if (group_ <= 0) return order;
    for (std::int64_t begin = 0; begin < n_; begin += group_) {
      auto first = order.begin() + begin;
      auto last = order.begin() + std::min(n_, begin + group_);
      std::stable_sort(first, last,
                       [&](std::int64_t a, std::int64_t b) { return lengths_[a] > lengths_[b]; });
    }
    return order;
  }

  std::int64_t n_;
  std::uint64_t seed_;
  bool shuffle_;
  std::vector<int> lengths_;
  std::int64_t group_ = 0;
  std::map<std::int64_t, std::vector<std::int64_t>> orders_;
};

}  // namespace bertfit
