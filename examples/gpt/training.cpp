// examples/gpt/training.cpp — the language model's training step and loss estimate.
#include "examples/gpt/training.h"

#include <memgrad/autograd/elementwise.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include "examples/common/accumulation.h"
#include "examples/gpt/windows.h"
#include <memgrad/optim/clip_grad.h>
#include <memgrad/optim/param_groups.h>

namespace gpt {
namespace {

// The cross-entropy of every position's prediction of the next byte (through `ddp` when
// given, so that its backward averages the gradients over the ranks).
mg::Tensor next_byte_loss(mg::nn::GPT& model, const mg::data::Batch& batch,
                          mg::distributed::DistributedDataParallel* ddp = nullptr) {
  if (ddp != nullptr) return ddp->call([&] { return model.loss(batch.inputs, batch.targets); });
  return model.loss(batch.inputs, batch.targets);
}

// The step after the gradients: unscaled, clipped, applied (skipped after an fp16 overflow).
void apply_gradients(mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision, double clip_norm) {
  // NOTE: clipping needs the true gradients, so float16's are unscaled first (a no-op
  // without a scaler); the scaler's step then does not unscale again.
  precision.scaler().unscale_(optimizer);
  mg::optim::clip_grad_norm_(optimizer.all_params(), clip_norm);
  precision.step(optimizer);
}

}  // namespace

std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>> adamw_groups(const mg::nn::GPT& model, double lr) {
  return mg::optim::weight_decay_groups(
      model, mg::optim::AdamWOptions{.lr = lr, .beta1 = 0.9, .beta2 = 0.99, .weight_decay = 0.1});
}

mg::optim::AdamW make_optimizer(const mg::nn::GPT& model, double lr) { return mg::optim::AdamW(adamw_groups(model, lr)); }

mg::Tensor accumulate_gradients(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                                const std::function<mg::data::Batch()>& next_batch, const StepPlan& plan,
                                examples::AutoAccumulation* auto_accum) {
  return examples::accumulate_gradients(
             optimizer, precision, next_batch,
             [&](const mg::data::Batch& micro_batch) { return next_byte_loss(model, micro_batch, plan.ddp); },
             {.batches = plan.accum, .micro_batch_rows = plan.micro_batch_rows, .ddp = plan.ddp,
              .auto_accum = auto_accum})
      .loss;
}

mg::Tensor optimizer_step(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                          const std::function<mg::data::Batch()>& next_batch, const StepPlan& plan) {
  const mg::Tensor step_loss = accumulate_gradients(model, optimizer, precision, next_batch, plan);
  apply_gradients(optimizer, precision, plan.clip_norm);
  return step_loss;
}

mg::Tensor train_step(mg::nn::GPT& model, mg::optim::Optimizer& optimizer, examples::MixedPrecision& precision,
                      mg::optim::LRScheduler* scheduler, mg::data::DataLoader& windows, int64_t step,
                      const StepPlan& plan, examples::GraphedStep* graph, examples::AutoAccumulation* auto_accum,
                      const std::function<void()>& restart) {
  MG_CHECK(graph == nullptr || auto_accum == nullptr, "gpt: --auto-accum retries eager steps; a CUDA graph's step is ",
           "captured once.");
  windows.set_epoch(step);
  auto next_batch = [&] {
    mg::data::Batch batch;
    MG_CHECK(windows.next(batch), "gpt: the windows' loader ran out within step ", step,
             ". Hint: make it with random_window_batches(..., plan.batch_size, plan.accum, ...).");
    return batch;
  };
  mg::Tensor loss;
  if (auto_accum != nullptr) {
    auto_accum->run(precision.device(), plan.accum, plan.batch_size, [&](int64_t micro_batch_rows) {
      StepPlan split_plan = plan;
      split_plan.micro_batch_rows = micro_batch_rows;
      loss = accumulate_gradients(model, optimizer, precision, next_batch, split_plan, auto_accum);
    }, [&] {
      optimizer.zero_grad();
      if (restart) restart();
      windows.set_epoch(step);  // the same windows again
    });
    apply_gradients(optimizer, precision, plan.clip_norm);
  } else if (graph == nullptr) {
    loss = optimizer_step(model, optimizer, precision, next_batch, plan);
  } else {
    const mg::data::Batch drawn = next_batch();  // host work and copies: outside the captured step
    loss = graph->run(drawn, [&](const mg::data::Batch& on_device) {
      return optimizer_step(model, optimizer, precision, [&] { return on_device; }, plan);
    });
  }
  if (scheduler != nullptr) scheduler->step();
  return loss;
}

mg::Tensor estimate_loss(mg::nn::GPT& model, const examples::MixedPrecision& precision,
                         const std::vector<uint8_t>& bytes, int64_t iters, int64_t batch_size, uint64_t seed,
                         const examples::DistributedRun* distributed) {
  mg::NoGradGuard no_grad;
  const examples::AutocastRegion autocast(precision);
  model.eval();
  mg::Generator generator(seed);
  const WindowsDataset windows(bytes, model.options().block_size);
  // This rank's share of the `iters` batches (every rank draws them all, to keep in step).
  mg::data::DataLoader batches(windows, random_window_batches(windows, generator, batch_size, iters, precision.device(),
                                                              distributed != nullptr ? distributed->rank() : 0,
                                                              distributed != nullptr ? distributed->size() : 1));
  mg::Tensor total = mg::zeros({}, {.dtype = mg::DType::Float64, .device = precision.device()});
  for (const mg::data::Batch& batch : batches) total = total + next_byte_loss(model, batch);
  model.train();
  if (distributed != nullptr && distributed->active()) distributed->group()->all_reduce(total)->wait();
  return total * (1.0 / static_cast<double>(iters));
}

}  // namespace gpt
