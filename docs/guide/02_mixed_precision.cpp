// docs/guide/02_mixed_precision.cpp — training under autocast: float16 with a GradScaler on
// a GPU, bfloat16 without one on the CPU (docs/guide.md, "Mixed precision"). Fails (exit 1)
// unless the Linear layers really ran in 16 bits, the weights stayed float32 and the model learns.
#include <cstdio>
#include <vector>

#include <memgrad/memgrad.h>

#include "data.h"
#include "device.h"
#include "net.h"
#include "training.h"

int main() {
  mg::manual_seed(0);
  const mg::Device device = pick_device();
  Data data(device);
  auto model = std::make_shared<Net>();
  model->to(device);
  mg::optim::Adam optimizer(model->parameters(), {.lr = 1e-3});

  // [guide: amp]
  // float16 needs its loss scaled so that small gradients do not underflow to zero;
  // bfloat16 has float32's range and needs no scaler (PyTorch's CPU autocast is bfloat16 too).
  const bool float16 = device.is_cuda();
  const mg::DType amp_dtype = float16 ? mg::DType::Float16 : mg::DType::BFloat16;
  mg::amp::GradScaler scaler({.enabled = float16});  // disabled: every call passes through

  auto amp_train_step = [&](const mg::data::Batch& batch) {
    optimizer.zero_grad();
    mg::Tensor loss;
    {
      mg::amp::AutocastGuard autocast(amp_dtype, device.type);
      loss = mg::cross_entropy((*model)(batch.inputs), batch.targets);  // float32 loss
    }
    scaler.scale(loss).backward();  // outside the guard, as in PyTorch
    scaler.step(optimizer);         // unscales; skips the step if a gradient overflowed
    scaler.update();                // adapts the scale
    return loss.detach();
  };
  // [guide: end]

  // What autocast does to one forward: the Linear layers compute in 16 bits; multiplying by
  // the float32 temperature promotes the logits to float32; the weights stay float32.
  mg::data::Batch first;
  data.train_loader.next(first);
  mg::DType hidden_dtype, logits_dtype;
  {
    mg::amp::AutocastGuard autocast(amp_dtype, device.type);
    hidden_dtype = (*model->input)(first.inputs).dtype();
    logits_dtype = (*model)(first.inputs).dtype();
  }
  data.train_loader.reset();
  std::printf("device %s: autocast to %s; input layer's output %s, logits %s, input.weight %s; GradScaler %s\n",
              device.str().c_str(), mg::dtype_name(amp_dtype), mg::dtype_name(hidden_dtype),
              mg::dtype_name(logits_dtype), mg::dtype_name(model->input->weight.dtype()),
              scaler.is_enabled() ? "on" : "off");

  std::vector<double> epoch_losses;
  for (int epoch = 0; epoch < 5; ++epoch) {
    model->train();
    std::vector<mg::Tensor> losses;
    for (const mg::data::Batch& batch : data.train_loader) losses.push_back(amp_train_step(batch));
    epoch_losses.push_back(mg::stack(losses).mean().item());
    std::printf("epoch %d: training loss %.4f\n", epoch + 1, epoch_losses.back());
  }
  double test_accuracy;
  {
    mg::amp::AutocastGuard autocast(amp_dtype, device.type);  // evaluation may autocast too
    test_accuracy = accuracy(*model, data.test_loader);
  }
  std::printf("test accuracy %.1f%%\n", 100 * test_accuracy);
  if (scaler.is_enabled()) std::printf("loss scale %g\n", scaler.get_scale());  // reads the GPU: a sync

  if (hidden_dtype != amp_dtype || model->input->weight.dtype() != mg::DType::Float32 ||
      !(epoch_losses.back() < 0.5 * epoch_losses.front()) || test_accuracy < 0.9) {
    std::fprintf(stderr, "FAILED: input layer's output %s (expected %s), weights %s (expected float32), loss "
                 "%.4f -> %.4f (expected to halve at least), test accuracy %.1f%% (expected >= 90%%)\n",
                 mg::dtype_name(hidden_dtype), mg::dtype_name(amp_dtype),
                 mg::dtype_name(model->input->weight.dtype()), epoch_losses.front(), epoch_losses.back(),
                 100 * test_accuracy);
    return 1;
  }
  return 0;
}
