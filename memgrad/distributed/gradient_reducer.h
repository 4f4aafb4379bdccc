// distributed/gradient_reducer.h — the backward side of DistributedDataParallel: it
// watches each parameter's gradient arrive (a post-accumulate-grad hook) and all-reduces
// (averages) each bucket as soon as all of its gradients are in, asynchronously, while
// backward goes on; when backward ends (autograd::queue_callback) it deals with the
// parameters that got no gradient and waits for every bucket.
//
// Buckets are started strictly in their order (gradient_buckets.h), on every rank: a bucket
// that is complete early waits for those before it, so that every rank issues the same
// collectives in the same order whatever order its gradients came in.
//
// A backward either synchronises (the default) or only accumulates into the local
// gradients (set by prepare_for_backward; DistributedDataParallel::no_sync). Parameters
// that get no gradient in a synchronising backward are an mg::Error naming them, or, with
// find_unused_parameters, reduced with the gradient they hold (zeros, unless gradients
// were accumulated under no_sync), once backward ends.
//
// Each synchronising backward is timed on the host (BackwardTimeline), so that the overlap
// of the all-reduces with backward can be read without a profiler.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/distributed/gradient_buckets.h"
#include "memgrad/distributed/process_group.h"
#include "memgrad/nn/module.h"

namespace mg::distributed {

// When the host did what, in the most recent synchronising backward that completed: ms of
// std::chrono::steady_clock since that backward's first gradient hook (the gradient of the
// parameter used last in forward, usually; the time from loss.backward() to it is not
// counted). A bucket launched before last_gradient_ms overlaps the rest of backward: its
// all_reduce was issued while later gradients were still to be computed; the buckets
// launched at or after it (the last, and those waiting for it) had nothing left to overlap
// with but the end of backward.
// These are the host's issue times. On a CPU backend (MPI) the work happens as issued, but
// on GPUs the host runs ahead of the device: a launch is when the all_reduce was enqueued
// on the communication stream, which waits for the gradients' kernels, not when it ran.
struct BackwardTimeline {
  std::vector<double> bucket_launch_ms;  // per bucket, in reduction order: its all_reduce issued
  double last_gradient_ms = 0;           // the backward's last gradient hook began
  double backward_end_ms = 0;            // the end-of-backward callback began (before the waits)
  double reduced_ms = 0;                 // every bucket's wait() returned (on NCCL: the compute
                                         // stream waits for them; the host does not)
};

class GradientReducer {
 public:
  // `parameters`: those that require grad, under the names errors use.
  GradientReducer(std::shared_ptr<ProcessGroup> group, nn::NamedTensors parameters, const BucketCaps& caps,
                  bool find_unused_parameters);
  // Removes its hooks from the parameters.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before the forward of the next backward: whether that backward synchronises, and every
  // parameter's .grad made its bucket view again (an optimizer's zero_grad may have dropped it).
  void prepare_for_backward(bool synchronize);

  const GradientBuckets& buckets() const { return buckets_; }
  const nn::NamedTensors& parameters() const { return parameters_; }
  // Empty (no buckets launched) until a synchronising backward has completed.
  const BackwardTimeline& last_backward_timeline() const { return last_timeline_; }

 private:
  void on_gradient_ready(size_t parameter);
  // Starts the all_reduce of every complete bucket whose predecessors have started.
  void start_complete_buckets();
  // At the end of a synchronising backward: the unused parameters, then every wait.
  void finish_backward();
  void start_new_round();
  std::string names_of(const std::vector<size_t>& parameters) const;
  double ms_since_first_gradient() const;

  std::shared_ptr<ProcessGroup> group_;
  nn::NamedTensors parameters_;
  GradientBuckets buckets_;
  bool find_unused_parameters_;
  std::vector<uint64_t> hook_ids_;

  // The round: one synchronising backward.
  bool synchronize_ = true;
  bool finish_queued_ = false;
  std::vector<bool> ready_;          // per parameter: its gradient came in this round
  std::vector<size_t> missing_;      // per bucket: gradients not yet in
  size_t next_bucket_ = 0;           // the next bucket to start
  std::vector<std::shared_ptr<Work>> works_;  // of the buckets started, in order
  std::chrono::steady_clock::time_point first_gradient_;
  BackwardTimeline timeline_;                 // this round's, published when it completes
  BackwardTimeline last_timeline_;
};

}  // namespace mg::distributed
