// optim/offloaded_adam.h — Adam and AdamW whose state lives in host memory (ZeRO-Offload,
// Ren et al. 2021): the device keeps only the parameters and their gradients.
//
// Per parameter the host holds a float32 master copy, exp_avg and exp_avg_sq (and
// max_exp_avg_sq with amsgrad), tagged OPTIMIZER_STATE, pinned when the parameter is on
// CUDA; and, where the parameter is not a CPU float32 updated in place, a host copy of its
// gradient (GRADIENT) and for a 16-bit parameter the 16-bit result to send back
// (PARAMETER). A step copies the gradients to the host (on a side stream, non-blocking,
// one wait for all), runs core/cpu/host_adam.h's update on all cores, and copies the
// updated parameters back on the side stream; the caller's stream waits for that copy on
// the device, so the next forward reads the new values and the host does not wait.
//
// Memory on the device: none for the optimizer (memory::snapshot(cuda) shows 0 bytes of
// OPTIMIZER_STATE); on the host 12 bytes per element (16 with amsgrad) plus the copies.
// Host bytes show in memory::pinned_host_snapshot() (pinned) or snapshot(cpu).
//
// Exactness: the update is the CPU Adam kernel's arithmetic on float32 values, so on a
// CPU-only build a float32 model steps bit for bit as with optim::Adam / AdamW. A 16-bit
// parameter is updated in float32 (its master) and rounded once a step, as "AdamW with
// float32 master weights" (mixed precision), not as optim::AdamW on 16-bit parameters,
// which keeps its moments in 16 bits. On CUDA the result equals device AdamW to float
// rounding (the device kernel may contract into FMAs).
//
// Gradients stream to the host as backward makes them (OffloadOptions::stream_gradients,
// on by default): a post-accumulate-grad hook on each parameter starts its gradient's copy
// on the side stream at once, so the copies overlap the rest of backward. step() copies
// again only a gradient changed since (its storage's version moved: a GradScaler's
// unscale_(), clip_grad_norm_(), another micro-batch accumulated, a DDP all-reduce, or a
// new .grad): the host always updates with the gradients step() sees. A copy that raced
// with such a change is overwritten by the later one, which the side stream runs after it.
// So streaming pays where nothing changes gradients between backward and step (bf16
// autocast without clipping); with clipping or a GradScaler every gradient is copied twice,
// the second time at step(), as with stream_gradients off. In delayed mode the host buffers
// belong to the update in flight during backward, so gradients are copied at step().
//
// With OffloadOptions::delayed_update (ZeRO-Offload's one-step delayed parameter update),
// step() n (n = 1, 2, ...) first waits for update n-1 and writes its parameters into the
// model, then copies gradient n to the host and starts update n on a background thread,
// and returns: the host update overlaps the next forward and backward. After step() n the
// model holds the parameters of n-1 plain steps, and gradient n+1 is computed at those:
// every gradient is one update stale. finish_pending_update() applies the update in
// flight (call it before evaluating, saving with optim::save, or reading state()).
// A step skipped by a GradScaler also leaves the update in flight where it is.
#pragma once

#include <future>
#include <memory>
#include <unordered_map>

#include "memgrad/optim/adam.h"

namespace mg::optim {

struct OffloadOptions {
  bool delayed_update = false;   // ZeRO-Offload's delayed update (above); off: as PyTorch
  bool stream_gradients = true;  // copy each gradient to the host as backward makes it (above)
};

class OffloadedAdam : public Adam {
 public:
  explicit OffloadedAdam(std::vector<Tensor> params, AdamOptions options = {}, OffloadOptions offload = {});
  explicit OffloadedAdam(std::vector<ParamGroupOptions<AdamOptions>> groups, OffloadOptions offload = {});
  ~OffloadedAdam() override;
  // Its gradient hooks hold `this`.
  OffloadedAdam(const OffloadedAdam&) = delete;
  OffloadedAdam& operator=(const OffloadedAdam&) = delete;
  // float32, float16 or bfloat16 parameters, on the CPU or a CUDA device.
  void add_param_group(std::vector<Tensor> params, AdamOptions options);
  void step() override;
  // Delayed mode: waits for the update in flight and writes its parameters into the model.
  // Otherwise (or with none in flight) nothing to do.
  void finish_pending_update();
  StatePlacement state_placement(const Tensor& param) const override;

  // How the last step's gradients reached the host: streamed during backward and still
  // current, or copied by step() (changed since, not streamed, or a parameter updated in
  // place on the CPU, which needs no copy and counts in neither).
  struct GradientTransfers {
    int64_t streamed = 0;
    int64_t copied_at_step = 0;
  };
  GradientTransfers last_step_transfers() const { return last_step_transfers_; }

 protected:
  // GradScaler's flag is read on the host (a sync) rather than in a device kernel.
  bool skips_on_device() const override { return false; }
  OffloadedAdam(bool decoupled_weight_decay, OffloadOptions offload);

 private:
  struct HostUpdate;  // one step's host work and the copies back it ends with
  struct Transfers;   // CUDA: the side stream and its events (none on a CPU-only build)

  // Creates `param`'s state at its first step, brings `grad` to the host, and adds the
  // parameter's update to `update`.
  void prepare(size_t group_index, const Tensor& param, const Tensor& grad, HostUpdate& update);
  // Copies the updated parameters into the model (on CUDA: queued, the current stream waits).
  void copy_back(const HostUpdate& update);

  // Per parameter: the host copy of its gradient and the 16-bit result sent back, where used.
  struct HostCopies {
    Tensor grad, param;
  };
  // `param`'s host copies, made at its first use.
  HostCopies& host_copies_for(const Tensor& param);
  // The hook's half of stream_gradients: starts the copy of `param`'s gradient to the host.
  void stream_gradient(const Tensor& param);
  // Copies `grad` (param's) into its host copy: on the side stream for a CUDA parameter.
  void copy_gradient_to_host(const Tensor& param, const Tensor& grad, HostCopies& copies);
  // Whether the host copy of `param`'s gradient holds `grad` as it is now.
  bool streamed_copy_is_current(const Tensor& param, const Tensor& grad) const;
  // Makes the CUDA side stream at the first CUDA parameter seen; nothing otherwise.
  void ensure_transfers(const Tensor& param);

  OffloadOptions offload_;
  std::unordered_map<const TensorImpl*, HostCopies> host_copies_;
  // What a hook copied since the last step: which storage (weakly: a gradient freed
  // meanwhile must not match a new one at its address), where in it, and its version.
  struct StreamedGradient {
    std::weak_ptr<Storage> storage;
    int64_t offset = 0;
    uint64_t version = 0;
  };
  std::unordered_map<const TensorImpl*, StreamedGradient> streamed_;
  std::vector<std::pair<Tensor, uint64_t>> hooks_;  // (parameter, hook id) for the destructor
  GradientTransfers last_step_transfers_;
  std::unique_ptr<Transfers> transfers_;
  std::future<std::shared_ptr<HostUpdate>> pending_;  // delayed mode: the update in flight
};

class OffloadedAdamW : public OffloadedAdam {
 public:
  explicit OffloadedAdamW(std::vector<Tensor> params, AdamWOptions options = {}, OffloadOptions offload = {});
  explicit OffloadedAdamW(std::vector<ParamGroupOptions<AdamWOptions>> groups, OffloadOptions offload = {});
  void add_param_group(std::vector<Tensor> params, AdamWOptions options);
};

}  // namespace mg::optim
