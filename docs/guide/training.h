// docs/guide/training.h — the training step, the epoch loop and the evaluation the guide's
// programs share ("Training" in docs/guide.md shows the regions).
#pragma once

#include <cstdint>
#include <vector>

#include <memgrad/data/dataloader.h>
#include <memgrad/memgrad.h>

// [guide: train]
// One optimizer step on one batch; returns the loss, detached from its graph.
inline mg::Tensor train_step(mg::nn::Module& model, mg::optim::Optimizer& optimizer,
                             const mg::data::Batch& batch) {
  optimizer.zero_grad();  // drops last step's gradients (set to none: their memory is freed)
  mg::Tensor loss = mg::cross_entropy(model(batch.inputs), batch.targets);
  loss.backward();  // fills every parameter's .grad and frees the graph
  optimizer.step();
  return loss.detach();  // a number to log, without the graph behind it
}

// One pass over the loader (a new shuffle each time); returns the mean loss.
inline double train_epoch(mg::nn::Module& model, mg::optim::Optimizer& optimizer,
                          mg::data::DataLoader& loader) {
  model.train();
  std::vector<mg::Tensor> losses;  // left on the device: reading each would wait for the GPU
  for (const mg::data::Batch& batch : loader) losses.push_back(train_step(model, optimizer, batch));
  return mg::stack(losses).mean().item();
}
// [guide: end]

// [guide: evaluate]
// The share of samples whose largest logit is the right class.
inline double accuracy(mg::nn::Module& model, mg::data::DataLoader& loader) {
  mg::NoGradGuard no_grad;  // records no graph: nothing is saved for a backward
  model.eval();             // layers such as Dropout switch to their evaluation behaviour
  int64_t correct = 0, samples = 0;
  for (const mg::data::Batch& batch : loader) {
    mg::Tensor predictions = mg::argmax(model(batch.inputs), 1);  // (B) class indices
    correct += mg::sum(mg::eq(predictions, batch.targets)).item<int64_t>();
    samples += batch.targets.size(0);
  }
  return static_cast<double>(correct) / static_cast<double>(samples);
}
// [guide: end]
