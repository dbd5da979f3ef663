// The optimizer step (see step.h).
#include "train/step.h"

#include <cmath>
#include <functional>

#include "base/check.h"
#include "base/timer.h"
#include "comm/communicator.h"
#include "comm/grad_reducer.h"

namespace bertfit {
namespace {

// The classifiers' loss: the head's, against the batch's labels.
class HeadObjective final : public StepObjective {
 public:
  explicit HeadObjective(const BertModel& model) : model_(model) {}
  double loss(const Batch* batch, float share, Activations& acts) override {
    return share * model_.loss(batch->labels.data(), share, acts);
  }

 private:
  const BertModel& model_;
};

}  // namespace

TrainStep::TrainStep(const BertModel& model, AdamW& optimizer, Communicator* comm,
                     std::uint64_t seed, const GradSync& sync)
    : model_(model),
      optimizer_(optimizer),
      comm_(comm),
      seed_(seed),
      weights_(model.make_weights()),
      grads_(model.layout().total()),
      objective_(std::make_unique<HeadObjective>(model)) {
  if (comm_ == nullptr || comm_->world() == 1) return;
  rank_ = comm_->rank();
  world_ = comm_->world();
  // The word-embedding gradient is row-sparse (only the batch's token ids): the reducer sends
  // just the touched rows (grad_reducer.h). The layout puts that table first.
  const ParamEntry& word = model.layout().entry(Role::kWordEmb);
  CHECK(word.offset == 0, "word embeddings at offset ", word.offset);
  // Buckets are cut where backward reports finished gradients.
  reducer_ = std::make_unique<GradReducer>(*comm_, model.grad_ready_offsets(),
                                           model.layout().total(), sync.bucket_bytes, sync.wire,
                                           SparseHead{word.shape.dims[0], word.shape.dims[1]});
}

TrainStep::~TrainStep() = default;

void TrainStep::use_objective(std::unique_ptr<StepObjective> objective) {
  objective_ = std::move(objective);
}

StepReport TrainStep::run(float* params, const std::vector<MicroBatch>& micro, std::int64_t step,
                          double lr, double max_grad_norm, bool stop_requested) {
  CHECK(!micro.empty(), "a step needs at least one micro-batch");
  StepReport report;
  grads_.zero();
  if (reducer_) {
    for (const MicroBatch& m : micro)
      if (m.batch)
        reducer_->mark_rows(m.batch->input_ids.data(),
                            static_cast<std::int64_t>(m.batch->input_ids.size()));
  }
  double loss = 0, grad_squares = 0;
  Timer prepare;
  weights_.prepare(params, /*with_backward=*/true);  // the parameters changed in the last step
  report.forward_s += prepare.seconds();
  for (std::size_t k = 0; k < micro.size(); ++k) {
    const bool last = k + 1 == micro.size();
    // On the last micro-batch the reducer sends each bucket as backward finishes it.
    if (reducer_ && last) reducer_->begin_step(grads_.data());
    const Batch* b = micro[k].batch ? &*micro[k].batch : nullptr;
    if (b != nullptr || objective_->collective()) {
      const ModelInput in = b ? ModelInput{b->B, b->T, b->input_ids.data(),
                                           b->token_type_ids.data(), b->attention_mask.data()}
                              : ModelInput{};
      const DropoutState dropout{.train = true,
                                 .seed = seed_,
                                 .step = static_cast<std::uint64_t>(step),
                                 .micro = static_cast<std::uint64_t>(k * world_ + rank_)};
      Timer phase;
      if (b) model_.forward(weights_, in, dropout, acts_);
      loss += objective_->loss(b, micro[k].share, acts_);
      report.forward_s += phase.seconds();
      phase.reset();
      if (b) {
        std::function<void(std::int64_t)> on_grads_ready;
        if (reducer_ && last) {
          on_grads_ready = [this](std::int64_t from) { reducer_->ready(from); };
        }
        model_.backward(weights_, grads_.data(), in, dropout, acts_, on_grads_ready);
        report.backward_s += phase.seconds();
      }
    }
    if (reducer_ && last) {
      reducer_->ready(0);
      // The shares already make the sum a mean. The squares for clipping are summed per bucket
      // as each arrives, filling the wait for the rest.
      report.exposed_comm_s = reducer_->finish(
          1.0f, [&](const float* d, std::int64_t n) { grad_squares += sum_squares(d, n); });
    }
  }
  // Ranks agree on the loss and on whether any of them is asked to stop.
  double shared[2] = {loss, stop_requested ? 1.0 : 0.0};
  if (world_ > 1) comm_->allreduce_sum(shared, 2);
  report.loss = shared[0];
  report.stop = shared[1] > 0;
  Timer update;
  report.grad_norm =
      reducer_ ? std::sqrt(grad_squares) : grad_norm(grads_.data(), model_.layout().total());
  if (std::isfinite(report.loss) && std::isfinite(report.grad_norm)) {
    optimizer_.step(params, grads_.data(), lr, clip_coefficient(report.grad_norm, max_grad_norm));
    report.applied = true;
  }
  report.update_s = update.seconds();
  return report;
}

}  // namespace bertfit
