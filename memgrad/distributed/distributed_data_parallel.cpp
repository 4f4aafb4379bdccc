// distributed/distributed_data_parallel.cpp — construction (the same model on every rank,
// rank 0's values everywhere), the forward's preparations, and the bucket layout.
#include "memgrad/distributed/distributed_data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::distributed {
namespace {

nn::NamedTensors trained_parameters(const nn::Module& module) {
  nn::NamedTensors trained;
  for (const auto& [name, parameter] : module.named_parameters()) {
    if (parameter.requires_grad()) trained.emplace_back(name, parameter);
  }
  return trained;
}

// Every rank must wrap the same model: otherwise the broadcasts and all_reduces below
// would pair tensors of different sizes (or hang until the timeout). Compared through an
// all_gather of four counts per rank.
void check_same_model_on_every_rank(ProcessGroup& group, const nn::Module& module) {
  auto count = [](const std::vector<Tensor>& tensors) {
    int64_t elements = 0;
    for (const Tensor& tensor : tensors) elements += tensor.numel();
    return std::vector<int64_t>{static_cast<int64_t>(tensors.size()), elements};
  };
  std::vector<int64_t> mine = count(module.parameters());
  const std::vector<int64_t> buffers = count(module.buffers());
  mine.insert(mine.end(), buffers.begin(), buffers.end());
  const Tensor local = from_vector(mine, {4}).to(group.device());
  const Tensor all = empty({4 * group.size()}, {.dtype = DType::Int64, .device = group.device()});
  group.all_gather(all, local)->wait();
  // A simulated device (a memory prediction's) carries no values: nothing to compare.
  if (!all.storage()->has_data()) return;
  const std::vector<int64_t> counts = all.to_vector<int64_t>();  // on the host: waits for the gather
  for (int rank = 0; rank < group.size(); ++rank) {
    const int64_t* theirs = counts.data() + 4 * rank;
    MG_CHECK(std::equal(mine.begin(), mine.end(), theirs), "DistributedDataParallel: rank ", group.rank(),
             " wraps a model of ", mine[0], " parameters (", mine[1], " elements) and ", mine[2], " buffers (",
             mine[3], " elements), but rank ", rank, " one of ", theirs[0], " parameters (", theirs[1],
             " elements) and ", theirs[2], " buffers (", theirs[3], " elements). Hint: every rank must build the "
             "same model with the same options before wrapping it.");
  }
}

// The group carries tensors of one device (MPI: the CPU; NCCL: this rank's GPU).
void check_on_device(const nn::NamedTensors& tensors, const ProcessGroup& group, const char* what) {
  for (const auto& [name, tensor] : tensors) {
    MG_CHECK(tensor.device() == group.device(), "DistributedDataParallel: ", what, " '", name, "' is on ",
             tensor.device(), ", but the ", group.backend_name(), " process group carries tensors on ", group.device(),
             ". Hint: move the model there (model->to(group->device())) before wrapping it.");
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const DistributedDataParallelOptions& options)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), group_(std::move(group)), options_(options) {
  MG_CHECK(module_ != nullptr, "DistributedDataParallel: the module to wrap is null.");
  MG_CHECK(group_ != nullptr, "DistributedDataParallel: the process group is null. Hint: "
           "mg::distributed::init_process_group().");
  register_module("module", module_);
  check_on_device(module_->named_parameters(), *group_, "parameter");
  check_on_device(module_->named_buffers(), *group_, "buffer");
  check_same_model_on_every_rank(*group_, *module_);
  std::vector<Tensor> state = module_->parameters();
  const std::vector<Tensor> buffers = module_->buffers();
  state.insert(state.end(), buffers.begin(), buffers.end());
  broadcast_coalesced(*group_, state, /*root=*/0, options_.broadcast_chunk_bytes);
  reducer_ = std::make_unique<GradientReducer>(
      group_, trained_parameters(*module_),
      BucketCaps{.first_bucket_bytes = options_.first_bucket_bytes, .bucket_bytes = options_.bucket_bytes},
      options_.find_unused_parameters);
}

void DistributedDataParallel::before_forward() {
  // Only a forward that records a graph prepares a backward; and a forward that backward
  // itself runs (a checkpoint recomputing the whole model) must not start a new round.
  if (!GradMode::is_enabled() || autograd::in_backward()) return;
  if (options_.broadcast_buffers) {
    const std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) broadcast_coalesced(*group_, buffers, /*root=*/0, options_.broadcast_chunk_bytes);
  }
  reducer_->prepare_for_backward(synchronize_);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  before_forward();
  return (*module_)(input);
}

Tensor DistributedDataParallel::call(const std::function<Tensor()>& forward_fn) {
  NamedCall call(*this);
  before_forward();
  NamedCall module_call(*module_);
  return forward_fn();
}

std::vector<BucketLayout> DistributedDataParallel::bucket_layout() const {
  const GradientBuckets& buckets = reducer_->buckets();
  std::vector<BucketLayout> layout;
  for (size_t bucket = 0; bucket < buckets.num_buckets(); ++bucket) {
    const Tensor& flat = buckets.flat(bucket);
    BucketLayout entry{static_cast<int64_t>(flat.nbytes()), flat.dtype(), flat.device(), {}};
    for (size_t index : buckets.members(bucket)) entry.parameter_names.push_back(reducer_->parameters()[index].first);
    layout.push_back(std::move(entry));
  }
  return layout;
}

std::string DistributedDataParallel::bucket_layout_str() const {
  std::string text;
  const std::vector<BucketLayout> layout = bucket_layout();
  for (size_t bucket = 0; bucket < layout.size(); ++bucket) {
    char head[96];
    std::snprintf(head, sizeof head, "bucket %zu: %lld bytes %s:", bucket, static_cast<long long>(layout[bucket].bytes),
                  dtype_name(layout[bucket].dtype));
    text += head;
    for (const std::string& name : layout[bucket].parameter_names) text += " " + name;
    text += "\n";
  }
  return text;
}

std::string DistributedDataParallel::extra_repr() const {
  return mg::detail::str_cat("world_size=", group_->size(), ", backend=", group_->backend_name(),
                             ", buckets=", reducer_->buckets().num_buckets());
}

}  // namespace mg::distributed
