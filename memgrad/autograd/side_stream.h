// autograd/side_stream.h — backward work that nothing in the backward waits for, run on a
// second CUDA stream beside the chain that does.
//
// A convolution's backward makes two gradients: its input's, which the next node needs at
// once, and its weight's, which only the optimizer reads, after backward. The weight
// gradients (compute-bound GEMMs) can run on a side stream while the main stream goes on
// with the next batch norm (memory-bound) and the next input gradient, filling the tails
// of those kernels and the gaps between their launches (set_weight_gradients_on_side_stream).
//
// How it stays correct:
// - A node's backward hands such work to SideStreamWork, made at its start: the side
//   stream waits for the main stream's work up to that point (the node's inputs are
//   ready), then runs the work. The main stream's tensors it reads are held until the main
//   stream waits for that work: two pieces of work later, or at backward's end. So their
//   blocks go back to the allocator once the main stream's later work is ordered after
//   their last use (record_stream would hold them back until the device got there, with
//   the host milliseconds ahead: ResNet-50 reserved 2 GB more).
// - The engine knows which gradients were made on the side stream. A node all of whose
//   gradients came from there, and that keeps no tensors from forward and runs no hooks
//   (the weight's autocast conversion, AccumulateGrad: Node::may_run_on_side_stream),
//   runs there too. Anything else that reads such a gradient (a sum of two, a node with
//   saved tensors or hooks, data-parallel training's bucket hooks) first makes the main
//   stream wait for the side stream (a join), and runs on the main stream.
// - Backward ends with a join, so whatever runs after it (the end-of-backward callbacks,
//   GradScaler, the optimizer) sees every gradient.
// - After a join, the main stream may free blocks the side stream made; the side stream
//   waits for the main stream again before its next work reuses one.
//
// Used only where it can be: on a CUDA device, inside backward, outside a CUDA graph
// capture (whose private pool routes one stream's allocations) and outside anomaly mode
// (which reads every gradient as soon as it is made).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>

#include "memgrad/core/tensor.h"

namespace mg::autograd {

// Whether convolutions' weight gradients run on a side stream in backward (above).
// Process-wide. Results are bit-identical either way. The side stream has the device's
// normal (lowest) priority; run the step on a stream of higher priority
// (mg::cuda::Stream(device, StreamPriority::High) under a StreamGuard) so that the device
// places the main stream's kernels first and the weight gradients fill what they leave:
// at equal priority the weight gradients take the SMs the next batch norm waits for.
// Measured on an H200 (2026-12-03, float16 channels_last, eager steps, medians of 3 runs):
// ResNet-18 b256 3.65 -> 3.57 ms with the main stream on the legacy default stream, and
// -> 3.33 ms with it at the highest priority; ResNet-50 b128 16.40 -> 16.30 ms either way.
// Peak allocated within 1 MiB, reserved 54 and 110 MiB more (the side stream's own blocks:
// weight gradients, cuDNN workspaces). Off by default: the memory predictor (memory/)
// models one stream, and the gain needs the caller's stream to have a high priority.
void set_weight_gradients_on_side_stream(bool on);
bool weight_gradients_on_side_stream();

// How many pieces of work and nodes have run on a side stream on this thread (what tests
// and benchmarks read to know the side stream was used).
uint64_t side_stream_runs();

// Made by a node's backward before it enqueues anything: marks, where a side stream can be
// used and the node will `use` it, the main stream's work so far.
class SideStreamWork {
 public:
  SideStreamWork(Device device, bool use);
  SideStreamWork(const SideStreamWork&) = delete;
  SideStreamWork& operator=(const SideStreamWork&) = delete;

  // Runs `work` on the side stream after the mark, with `operands` (tensors it reads that
  // the main stream made) held until the main stream waits for it, and tells the engine
  // that the node's gradient `output` was made there. Without a side stream: runs `work`
  // here.
  void run(uint32_t output, std::initializer_list<Tensor> operands, const std::function<void()>& work);

 private:
  Device device_;
  bool available_ = false;
  bool marked_ = false;  // false where the node itself runs on the side stream
};

// ---- for the engine (autograd/engine.cpp) ----

// One node's run. With `on_side_stream` the node runs on `device`'s side stream (which
// first waits for the main stream if a join came since it last did); either way the scope
// collects which of the node's gradients SideStreamWork made there.
class NodeStreamScope {
 public:
  NodeStreamScope(bool on_side_stream, Device device);
  ~NodeStreamScope();
  NodeStreamScope(const NodeStreamScope&) = delete;
  NodeStreamScope& operator=(const NodeStreamScope&) = delete;

  // Whether the node's gradient `output` was made on a side stream.
  bool made_on_side_stream(size_t output) const;

 private:
  friend class SideStreamWork;
  uint64_t outputs_on_side_ = 0;  // bit i: gradient i (a node with more than 64 has none here)
  NodeStreamScope* outer_;
  struct OnSideStream;
  std::unique_ptr<OnSideStream> on_side_;  // the current stream switched, while the node runs
};

// Makes each device's main stream wait for the work its side stream has been given since
// the last join, and releases the tensors that work read. Cheap when there is none.
void join_side_streams();

}  // namespace mg::autograd
