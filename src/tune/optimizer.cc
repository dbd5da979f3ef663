// The grid and random optimisers (optimizer.h).
#include "tune/optimizer.h"

#include <random>
#include <set>

#include "base/error.h"
#include "tune/optuna_driver.h"

namespace bertfit::tune {
namespace {

Setting setting_at(const Space& space, long index) {
  Setting s;
  for (auto d = space.dims.rbegin(); d != space.dims.rend(); ++d) {
    const long n = static_cast<long>(d->values.size());
    s[d->knob->name] = d->values[index % n];
    index /= n;
  }
  return s;
}

class GridOptimizer : public Optimizer {
 public:
  explicit GridOptimizer(const Space& space) : space_(space) {}
  const char* name() const override { return "grid"; }
  std::optional<Setting> ask() override {
    if (next_ >= space_.combinations()) return std::nullopt;
    return setting_at(space_, next_++);
  }
  void tell(const Setting&, std::optional<double>) override {}

 private:
  Space space_;
  long next_ = 0;
};

class RandomOptimizer : public Optimizer {
 public:
  RandomOptimizer(const Space& space, unsigned seed) : space_(space), rng_(seed) {}
  const char* name() const override { return "random"; }
  std::optional<Setting> ask() override {
    const long n = space_.combinations();
    if (static_cast<long>(drawn_.size()) >= n) drawn_.clear();
    std::uniform_int_distribution<long> pick(0, n - 1);
    long i = pick(rng_);
    while (drawn_.count(i)) i = (i + 1) % n;  // the next one not drawn yet
    drawn_.insert(i);
    return setting_at(space_, i);
  }
  void tell(const Setting&, std::optional<double>) override {}

 private:
  Space space_;
  std::mt19937 rng_;
  std::set<long> drawn_;
};

}  // namespace

std::unique_ptr<Optimizer> make_grid_optimizer(const Space& space) {
  return std::make_unique<GridOptimizer>(space);
}

std::unique_ptr<Optimizer> make_random_optimizer(const Space& space, unsigned seed) {
  return std::make_unique<RandomOptimizer>(space, seed);
}

}  // namespace bertfit::tune

namespace bertfit::tune {
namespace {

class TpeOptimizer : public Optimizer {
 public:
  TpeOptimizer(const Space& space, bool minimize, unsigned seed, int startup)
      : driver_(space, minimize, seed, startup) {}
  const char* name() const override { return "tpe"; }
  std::optional<Setting> ask() override { return driver_.ask(); }
  void tell(const Setting& s, std::optional<double> value) override {
    driver_.tell(s, value ? &*value : nullptr);
  }
  nlohmann::json importance() override { return driver_.importance(); }

 private:
  OptunaDriver driver_;
};

}  // namespace

std::unique_ptr<Optimizer> make_tpe_optimizer(const Space& space, bool minimize, unsigned seed,
                                              int startup) {
  return std::make_unique<TpeOptimizer>(space, minimize, seed, startup);
}

nlohmann::json fanova_importance(const Space& space,
                                 const std::vector<std::pair<Setting, double>>& measured,
                                 bool minimize, unsigned seed, std::string& why) {
  try {
    OptunaDriver driver(space, minimize, seed, 1);
    for (const auto& [s, v] : measured) driver.tell(s, &v);
    return driver.importance();
  } catch (const Error& e) {
    why = e.what();
    return nlohmann::json::object();
  }
}

}  // namespace bertfit::tune
