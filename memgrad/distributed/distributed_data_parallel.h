// distributed/distributed_data_parallel.h — DistributedDataParallel (DDP): one model
// replica per process, trained as one model. Each rank runs forward and backward on its
// own part of the batch; backward averages the gradients over the ranks, so every rank's
// optimizer takes the same step and the replicas stay identical.
//
//   auto group = mg::distributed::init_process_group();            // mpirun -np N ./train
//   auto ddp = std::make_shared<mg::distributed::DistributedDataParallel>(model, group);
//   mg::optim::SGD optimizer(ddp->parameters(), {.lr = 0.1});
//   for (...) {                                  // each rank: its shard (DistributedSampler)
//     optimizer.zero_grad();
//     mg::Tensor loss = mg::cross_entropy((*ddp)(input), target);
//     loss.backward();                           // gradients averaged over the ranks here
//     optimizer.step();
//   }
//
// As PyTorch's torch.nn.parallel.DistributedDataParallel:
// - At construction the parameters and buffers are broadcast from rank 0, so every replica
//   starts from rank 0's weights (after checking that every rank has the same number of
//   parameters and elements).
// - Gradients are bucketed (gradient_buckets.h: reverse registration order, a 1 MiB first
//   bucket, then 25 MiB) and each bucket is all-reduced (averaged) as soon as its last
//   gradient is in, asynchronously, while backward computes the rest; backward returns once
//   every bucket is averaged (gradient_reducer.h).
// - Gradients are views into the buckets (PyTorch's gradient_as_bucket_view=True). Each
//   training forward makes them views again, so an optimizer's zero_grad (set to none) is
//   fine; gradients that replace a view later (zero_grad between forward and backward) are
//   copied into the bucket when they arrive.
// - no_sync(): while its guard lives, forwards and their backwards only accumulate into the
//   local gradients; the first backward after a forward outside it averages the sum.
//   Whether a backward synchronises is decided by its forward, as in PyTorch.
// - A parameter that gets no gradient in a backward is an mg::Error naming it, unless
//   find_unused_parameters: then its gradient is averaged as it stands (zeros, unless
//   accumulated under no_sync), after the rest of backward. Unlike PyTorch, memgrad does
//   not find parameters unused on every rank to leave their .grad alone: they get zeros,
//   which an optimizer with momentum or weight decay still steps on.
// - Buffers (batch norm's running statistics) are broadcast from rank 0 at each forward
//   with grad mode on (broadcast_buffers, on by default); forwards under NoGradGuard (an
//   evaluation, perhaps on rank 0 alone) send nothing. Batch norm normalises each rank's
//   own batch (no SyncBatchNorm).
// - The wrapped module is the child "module": parameters() are its parameters, named
//   "module.<name>"; state_dict() has that prefix too (save module().state_dict() to load
//   it without DDP). Move the model to its device and dtype before wrapping it.
//
// Memory, per rank, beyond the same model trained in one process:
// - GRADIENT: the buckets, exactly the bytes of the gradients of the parameters that
//   require grad (no padding), allocated at construction and held for DDP's lifetime. The
//   gradients live in them, so GRADIENT holds the same bytes as in one process, but from
//   construction on, also through forward and after zero_grad (in one process they exist
//   from backward to zero_grad). PyTorch's default (gradient_as_bucket_view=False) holds
//   the buckets as a second copy of the gradients; memgrad does not.
// - COMMUNICATION: the staging of coalesced broadcasts (coalesced_broadcast.h), and
//   nothing else: during construction a copy of the parameters and buffers, and during
//   each training forward a copy of the buffers (broadcast_buffers), freed before the
//   constructor returns and before the module's forward runs. Between those, zero. The
//   all_reduce works in place on the buckets.
// - What the backend holds outside memgrad's allocator (MPI's or NCCL's own buffers) is
//   not counted.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/distributed/coalesced_broadcast.h"
#include "memgrad/distributed/gradient_buckets.h"
#include "memgrad/distributed/gradient_reducer.h"
#include "memgrad/distributed/process_group.h"
#include "memgrad/nn/module.h"

namespace mg::distributed {

struct DistributedDataParallelOptions {
  int64_t first_bucket_bytes = BucketCaps{}.first_bucket_bytes;  // 1 MiB
  int64_t bucket_bytes = BucketCaps{}.bucket_bytes;              // 25 MiB (PyTorch's bucket_cap_mb)
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  int64_t broadcast_chunk_bytes = kDefaultBroadcastChunkBytes;  // 250 MiB
};

// One bucket, for inspection: what bucket_layout() lists in reduction order.
struct BucketLayout {
  int64_t bytes = 0;  // its GRADIENT bytes: the sum of its parameters' gradients
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  std::vector<std::string> parameter_names;  // the wrapped module's names, in storage order
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          const DistributedDataParallelOptions& options = {});

  // The wrapped module's forward, after broadcast_buffers and the gradient views.
  Tensor forward(const Tensor& input) override;
  // The same for another entry point of the module (GPT::loss(tokens, targets)):
  //   Tensor loss = ddp->call([&] { return gpt->loss(tokens, targets); });
  Tensor call(const std::function<Tensor()>& forward_fn);

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& process_group() const { return *group_; }
  const DistributedDataParallelOptions& options() const { return options_; }

  // While the guard lives, forwards prepare backwards that accumulate locally.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.synchronize_) {
      ddp.synchronize_ = false;
    }
    ~NoSyncGuard() { ddp_.synchronize_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  std::vector<BucketLayout> bucket_layout() const;
  // The layout as a table: one line per bucket (bytes, dtype, parameters).
  std::string bucket_layout_str() const;

  // The host's times of the most recent synchronising backward (gradient_reducer.h's
  // BackwardTimeline): when each bucket's all_reduce was issued against when backward's
  // last gradient came in, that is, how much of the communication overlaps backward.
  const BackwardTimeline& last_backward_timeline() const { return reducer_->last_backward_timeline(); }

  std::string extra_repr() const override;

 private:
  // What every forward does before the module runs.
  void before_forward();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::unique_ptr<GradientReducer> reducer_;
  bool synchronize_ = true;
};

}  // namespace mg::distributed
