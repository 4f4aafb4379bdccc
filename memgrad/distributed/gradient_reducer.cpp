// distributed/gradient_reducer.cpp — bucket readiness during backward, the all_reduce of
// each bucket in order, and the end of backward (gradient_reducer.h says why this way).
#include "memgrad/distributed/gradient_reducer.h"

#include <utility>

#include "memgrad/autograd/engine.h"
#include "memgrad/core/error.h"

namespace mg::distributed {
namespace {

std::vector<Tensor> tensors_of(const nn::NamedTensors& named) {
  std::vector<Tensor> tensors;
  tensors.reserve(named.size());
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  return tensors;
}

}  // namespace

GradientReducer::GradientReducer(std::shared_ptr<ProcessGroup> group, nn::NamedTensors parameters,
                                 const BucketCaps& caps, bool find_unused_parameters)
    : group_(std::move(group)),
      parameters_(std::move(parameters)),
      buckets_(tensors_of(parameters_), caps),
      find_unused_parameters_(find_unused_parameters) {
  for (size_t index = 0; index < parameters_.size(); ++index) {
    hook_ids_.push_back(parameters_[index].second.register_post_accumulate_grad_hook(
        [this, index](const Tensor&) { on_gradient_ready(index); }));
  }
  start_new_round();
}

GradientReducer::~GradientReducer() {
  for (size_t index = 0; index < parameters_.size(); ++index) {
    parameters_[index].second.remove_post_accumulate_grad_hook(hook_ids_[index]);
  }
}

void GradientReducer::start_new_round() {
  finish_queued_ = false;
  ready_.assign(parameters_.size(), false);
  missing_.clear();
  for (size_t bucket = 0; bucket < buckets_.num_buckets(); ++bucket) missing_.push_back(buckets_.members(bucket).size());
  next_bucket_ = 0;
  works_.clear();
  timeline_ = {};
}

void GradientReducer::prepare_for_backward(bool synchronize) {
  // A round that a failed backward left open is abandoned: its collectives complete in
  // the group, and their errors (if any) show at its next collective.
  start_new_round();
  synchronize_ = synchronize;
  for (size_t index = 0; index < parameters_.size(); ++index) buckets_.attach(index);
}

void GradientReducer::on_gradient_ready(size_t parameter) {
  const size_t bucket = buckets_.bucket_of(parameter);
  // NOTE: a second gradient in one backward (a parameter used both inside and outside
  // mg::checkpoint is accumulated once by the recomputation's nested backward and once by
  // the outer one) is fine while its bucket waits: it adds into the bucket view. Once the
  // bucket's all_reduce has started it would race with it, and miss the average.
  MG_CHECK(!synchronize_ || !ready_[parameter] || bucket >= next_bucket_, "DistributedDataParallel: parameter '",
           parameters_[parameter].first, "' received a second gradient in one backward after its bucket (",
           bucket, ") had been all-reduced, so that gradient would not be averaged over the ranks. Hint: this "
           "happens when a parameter is used both inside and outside mg::checkpoint; use it on one side only.");
  buckets_.attach(parameter);  // .grad is the bucket view unless it was dropped after forward
  if (!synchronize_ || ready_[parameter]) return;
  if (!finish_queued_) {
    autograd::queue_callback([this] { finish_backward(); });
    finish_queued_ = true;
    first_gradient_ = std::chrono::steady_clock::now();
  }
  timeline_.last_gradient_ms = ms_since_first_gradient();
  ready_[parameter] = true;
  if (--missing_[bucket] == 0) start_complete_buckets();
}

void GradientReducer::start_complete_buckets() {
  while (next_bucket_ < buckets_.num_buckets() && missing_[next_bucket_] == 0) {
    timeline_.bucket_launch_ms.push_back(ms_since_first_gradient());
    works_.push_back(group_->all_reduce(buckets_.flat(next_bucket_), ReduceOp::Average));
    ++next_bucket_;
  }
}

void GradientReducer::finish_backward() {
  timeline_.backward_end_ms = ms_since_first_gradient();
  // Whatever happens below, the next backward starts a new round.
  struct NewRound {
    GradientReducer& reducer;
    ~NewRound() { reducer.start_new_round(); }
  } new_round{*this};
  std::vector<size_t> unused;
  for (size_t index = 0; index < parameters_.size(); ++index) {
    if (!ready_[index]) unused.push_back(index);
  }
  if (!unused.empty() && !find_unused_parameters_) {
    // The buckets already started are waited for, so the group stays usable on every rank
    // that is missing the same parameters (the usual case: a branch the model never takes).
    for (const auto& work : works_) work->wait();
    mg::detail::throw_error(mg::detail::str_cat(
        "DistributedDataParallel: ", unused.size(), " of ", parameters_.size(), " parameters received no gradient "
        "in this backward on rank ", group_->rank(), ": ", names_of(unused), ". Their buckets cannot be averaged "
        "over the ranks. Hint: make the loss depend on every parameter, set requires_grad_(false) on the ones "
        "not trained before wrapping the model, or construct DistributedDataParallel with "
        "find_unused_parameters = true (their gradients are then averaged as zeros)."));
  }
  for (size_t index : unused) {
    buckets_.attach(index);  // zeros unless accumulated under no_sync (or since forward)
    ready_[index] = true;
    --missing_[buckets_.bucket_of(index)];
  }
  start_complete_buckets();
  MG_ASSERT(next_bucket_ == buckets_.num_buckets(), "bucket ", next_bucket_, " of ", buckets_.num_buckets(),
            " not started at the end of backward");
  for (const auto& work : works_) work->wait();
  // The averages were written in place: whoever copied a gradient before (an offloaded
  // optimizer's streamed copy) sees that it changed.
  for (size_t bucket = 0; bucket < buckets_.num_buckets(); ++bucket) buckets_.flat(bucket).bump_version();
  timeline_.reduced_ms = ms_since_first_gradient();
  last_timeline_ = timeline_;
}

double GradientReducer::ms_since_first_gradient() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_gradient_).count();
}

std::string GradientReducer::names_of(const std::vector<size_t>& parameters) const {
  std::string names;
  for (size_t index : parameters) names += (names.empty() ? "" : ", ") + parameters_[index].first;
  return names;
}

}  // namespace mg::distributed
