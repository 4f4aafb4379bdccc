// cuda/captured_step.h — a training step captured once as a CUDA graph and replayed: one
// launch per step instead of one per kernel, so the host no longer paces small models.
//
//   mg::Tensor x = mg::zeros({128, 784}, {.device = mg::Device::cuda()});   // static input
//   mg::Tensor y = mg::zeros({128}, {.dtype = mg::DType::Int64, .device = mg::Device::cuda()});
//   mg::Tensor loss;
//   mg::cuda::CapturedStep step([&] {
//     optimizer.zero_grad();
//     loss = mg::cross_entropy(model->forward(x), y);
//     loss.backward();
//     optimizer.step();
//   });
//   for (auto& batch : loader) {
//     x.copy_(batch.images); y.copy_(batch.labels);   // into the same tensors, every step
//     step.replay();
//   }
//   float last = loss.item<float>();   // after replay, outside the step
//
// Construction runs the step `warmup_steps` times eagerly on a side stream (real steps:
// they create what a step makes once, such as the optimizer's moments, cuDNN's plans and
// cuBLAS's handles, outside the graph), then captures one more call without running it.
// Each replay() then runs the captured kernels on the same addresses: inputs must be
// copied into the tensors the step read during capture, and results read from the tensors
// it wrote (the loss above).
//
// Memory: blocks allocated during capture come from a private pool of the caching
// allocator that only this graph (and graphs made with share_pool_with, which must replay
// in the order they were captured) uses, so nothing else ever reuses an address the graph
// writes; the pool goes back when the last graph using it is destroyed. pool_bytes() is
// what the pool holds. Memory categories keep what capture recorded: a replay allocates
// nothing.
//
// What a step may not contain, refused with an mg::Error naming it while capturing
// (core/graph_capture.h): host synchronisation, copies to or from host memory (item(), to(cpu)),
// and random numbers drawn on the CPU (they would be drawn once, at capture).
// Other numbers the host passes to kernels are captured as values, except two kinds that
// change from step to step:
// - learning rates: optimizers keep those on the device from the warm-up on, so a
//   scheduler stepped between replays reaches them (optim/optimizer.h);
// - random numbers on the GPU (dropout, rand, randn, multinomial, attention dropout):
//   each replay first reserves, from every generator the step drew from, as many Philox
//   blocks as one eager step would, and writes {seed, offset} to the device, where the
//   captured kernels read it (core/graph_capture.h). So N replays draw exactly the numbers
//   of N eager steps, and a manual_seed between replays reaches them. A Generator the step
//   draws from must outlive the CapturedStep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "memgrad/core/device.h"

namespace mg::cuda {

class CapturedStep;

struct CaptureOptions {
  Device device = Device::cuda();
  // Eager runs before the capture; at least 1 (lazy state must exist before capture).
  int warmup_steps = 3;
  // Another graph whose private pool this one shares (both must replay in capture order).
  const CapturedStep* share_pool_with = nullptr;
};

class CapturedStep {
 public:
  explicit CapturedStep(std::function<void()> step, CaptureOptions options = {});
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // Enqueues one run of the captured step, ordered after the work enqueued so far on the
  // calling thread's current stream, which then waits for it. Does not wait for the device.
  void replay();

  // Bytes the graph's private memory pool holds (reserved from the device).
  size_t pool_bytes() const;
  int64_t replays() const;

 private:
  struct Graph;
  std::unique_ptr<Graph> graph_;
};

}  // namespace mg::cuda
