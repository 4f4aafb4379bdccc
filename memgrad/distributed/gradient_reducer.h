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
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "memgrad/distributed/gradient_buckets.h"
#include "memgrad/distributed/process_group.h"
#include "memgrad/nn/module.h"

namespace mg::distributed {

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

 private:
  void on_gradient_ready(size_t parameter);
  // Starts the all_reduce of every complete bucket whose predecessors have started.
  void start_complete_buckets();
  // At the end of a synchronising backward: the unused parameters, then every wait.
  void finish_backward();
  void start_new_round();
  std::string names_of(const std::vector<size_t>& parameters) const;

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
};

}  // namespace mg::distributed
