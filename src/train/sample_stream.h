// The run's sample stream: the examples epoch after epoch, each epoch in the order
// epoch_order(n, seed, epoch, shuffle); sample g of the run is row order_{g / n}[g % n]. It
// depends only on (n, seed, shuffle), so every rank and every resumed run sees the same
// stream, and a position in it is just a sample count.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "data/shuffle.h"

namespace bertfit {

class SampleStream {
 public:
  SampleStream(std::int64_t n, std::uint64_t seed, bool shuffle)
      : n_(n), seed_(seed), shuffle_(shuffle) {}

  std::int64_t row(std::int64_t g) {
    const std::int64_t epoch = g / n_;
    auto it = orders_.find(epoch);
    if (it == orders_.end()) {
      if (orders_.size() > 2) orders_.erase(orders_.begin());  // only neighbours are reused
      it = orders_.emplace(epoch, epoch_order(n_, seed_, epoch, shuffle_)).first;
    }
    return it->second[g % n_];
  }

 private:
  std::int64_t n_;
  std::uint64_t seed_;
  bool shuffle_;
  std::map<std::int64_t, std::vector<std::int64_t>> orders_;
};

}  // namespace bertfit
