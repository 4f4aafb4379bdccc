// docs/guide/03_bigger_batches.cpp — two ways to train with less activation memory
// (docs/guide.md, "Bigger batches"): gradient accumulation (a step over several
// micro-batches) and activation checkpointing (recompute instead of keep). Fails (exit 1)
// unless each gives the gradients of the plain step, holds fewer ACTIVATION bytes at its
// peak, and accumulation trains the model.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <memgrad/memgrad.h>

#include "checks.h"
#include "data.h"
#include "device.h"
#include "net.h"
#include "training.h"

namespace {

// [guide: activation-peak]
// The most ACTIVATION bytes (tensors saved for backward) held during one forward and
// backward of `model` on `batch`.
int64_t activation_peak(mg::nn::Module& model, const mg::data::Batch& batch, mg::Device device) {
  mg::memory::reset_peak_stats(device);
  mg::cross_entropy(model(batch.inputs), batch.targets).backward();
  return mg::memory::snapshot(device).category(mg::MemoryCategory::Activation).peak;
}
// [guide: end]

// [guide: accumulation]
// One pass over `loader` with an optimizer step every `micro_batches` batches: with batches
// of 16 and 4 micro-batches, each step sees 64 samples but holds the activations of 16.
// Returns the mean loss.
double train_epoch_accumulating(mg::nn::Module& model, mg::optim::Optimizer& optimizer,
                                mg::data::DataLoader& loader, int micro_batches) {
  model.train();
  std::vector<mg::Tensor> losses;
  optimizer.zero_grad();
  for (const mg::data::Batch& batch : loader) {
    mg::Tensor loss = mg::cross_entropy(model(batch.inputs), batch.targets);
    (loss / micro_batches).backward();  // adds into .grad, frees this micro-batch's graph
    losses.push_back(loss.detach());
    if (losses.size() % micro_batches == 0) {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
  return mg::stack(losses).mean().item();
}
// [guide: end]

// A model with `options` and the weights of `like`.
std::shared_ptr<Net> copy_of(const Net& like, NetOptions options, mg::Device device) {
  auto model = std::make_shared<Net>(options);
  model->to(device);
  model->load_state_dict(like.state_dict());
  return model;
}

}  // namespace

int main() {
  mg::manual_seed(0);
  const mg::Device device = pick_device();
  Data data(device);
  bool ok = true;

  // ---- Gradient accumulation: 4 micro-batches of 16 against one batch of 64 ----
  auto model = std::make_shared<Net>();
  model->to(device);
  mg::data::Batch batch;  // 64 samples
  data.train_loader.next(batch);
  data.train_loader.reset();

  auto whole = copy_of(*model, {}, device);
  const int64_t whole_peak = activation_peak(*whole, batch, device);
  int64_t micro_peak = 0;
  for (int64_t i = 0; i < 4; ++i) {  // what the loop below does, on the same 64 samples
    const mg::data::Batch micro{batch.inputs.narrow(0, 16 * i, 16), batch.targets.narrow(0, 16 * i, 16)};
    mg::memory::reset_peak_stats(device);
    (mg::cross_entropy((*model)(micro.inputs), micro.targets) / 4).backward();
    micro_peak = std::max(micro_peak, mg::memory::snapshot(device).category(mg::MemoryCategory::Activation).peak);
  }
  const double accumulation_difference = max_difference(gradients(*whole), gradients(*model));
  std::printf("accumulation: ACTIVATION peak %lld bytes for one batch of 64, %lld for micro-batches of 16; "
              "largest gradient difference %.3g\n", static_cast<long long>(whole_peak),
              static_cast<long long>(micro_peak), accumulation_difference);
  ok = ok && accumulation_difference < 1e-6 && micro_peak < whole_peak / 2;

  model->zero_grad();
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-3});
  mg::data::DataLoader micro_loader(data.train_set, {.batch_size = 16, .shuffle = true, .seed = 1,
                                                     .device = device});
  std::vector<double> epoch_losses;
  for (int epoch = 0; epoch < 3; ++epoch) {
    epoch_losses.push_back(train_epoch_accumulating(*model, optimizer, micro_loader, 4));
    std::printf("epoch %d with accumulation: training loss %.4f\n", epoch + 1, epoch_losses.back());
  }
  const double test_accuracy = accuracy(*model, data.test_loader);
  std::printf("test accuracy %.1f%%\n", 100 * test_accuracy);
  ok = ok && epoch_losses.back() < 0.5 * epoch_losses.front() && test_accuracy >= 0.9;

  // ---- Activation checkpointing: a deeper net, recomputed in segments ----
  // [guide: checkpointing]
  auto plain = std::make_shared<Net>(NetOptions{.hidden = 512, .depth = 8});
  auto recomputing = std::make_shared<Net>(NetOptions{.hidden = 512, .depth = 8, .checkpoint_segments = 4});
  recomputing->load_state_dict(plain->state_dict());  // the same weights
  // [guide: end]
  plain->to(device);
  recomputing->to(device);
  mg::data::DataLoader big_batches(data.train_set, {.batch_size = 256, .device = device});
  mg::data::Batch big;
  big_batches.next(big);
  const int64_t plain_peak = activation_peak(*plain, big, device);
  const int64_t recomputing_peak = activation_peak(*recomputing, big, device);
  const double checkpoint_difference = max_difference(gradients(*plain), gradients(*recomputing));
  std::printf("checkpointing (depth 8, hidden 512, batch 256): ACTIVATION peak %lld bytes plain, %lld bytes in 4 "
              "segments; largest gradient difference %.3g\n", static_cast<long long>(plain_peak),
              static_cast<long long>(recomputing_peak), checkpoint_difference);
  ok = ok && checkpoint_difference < 1e-6 && recomputing_peak < plain_peak * 3 / 4;

  if (!ok) {
    std::fprintf(stderr, "FAILED: see above (expected gradient differences < 1e-6, micro-batch peak below half "
                 "the batch's, checkpointed peak below 3/4 of the plain one, the loss to halve and >= 90%% test "
                 "accuracy)\n");
    return 1;
  }
  return 0;
}
