// cuda/kernels/optimizer.cu — fused CUDA optimizer updates: SGD, Adam/AdamW, Adagrad, many
// parameters per launch, in the manner of PyTorch's multi_tensor_apply.
//
// The per-element arithmetic is core/optimizer_formulas.h's, which the CPU kernels run too,
// in the element's compute type; per-step scalars (bias corrections, decayed learning rate)
// are computed in double, as there.
//
// NOTE: the step counter (a float32 on the device) must be incremented once and then read
// by every block, without a host sync. One kernel cannot do both race-free — blocks run in
// no fixed order, so a block that increments could do so before another block reads. So
// each update is two launches on the same stream: increment_steps_kernel adds 1 to every
// counter of the call (one thread per counter), then the update kernel, ordered after it
// by the stream, reads the new value. In the update kernel thread 0 of each block reads the
// counter and computes the block's per-step scalars (two pow() in double) into shared
// memory, so they cost once per block, not once per element.
//
// A GradScaler's found_inf (core/kernels.h's hyper.found_inf) is read by both launches:
// where it is set, the counters are not incremented and every block returns at once, so
// a skipped step costs two near-empty launches and no host sync. hyper.lr_on_device, where
// set (a step that may be captured as a CUDA graph), is read by the update kernels in
// place of the lr they were launched with, so a graph's replays see the host's latest.
//
// The packing of many tensors into one launch is multi_tensor_apply.cuh's; optimizer_apply
// adds the checks, the counters and the skip flag for every optimizer, and each optimizer
// adds only its per-element update and its kernel. The counters, the flag and Adam's
// constants are declared in optimizer_steps.cuh, which adam_8bit.cu shares.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "memgrad/core/optimizer_formulas.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/multi_tensor_apply.cuh"
#include "memgrad/cuda/kernels/optimizer_steps.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

inline constexpr int kStepsPerLaunch = 256;

struct StepList {
  float* step[kStepsPerLaunch];
  int count;
};

__global__ void increment_steps_kernel(StepList list, const float* found_inf) {
  if (overflowed(found_inf)) return;
  int t = static_cast<int>(threadIdx.x);
  if (t < list.count) *list.step[t] += 1.0f;
}

// A one-element tensor of `dtype` on `device`, as the optional hyper-parameter tensors
// (found_inf, lr_on_device) must be, or a clear error naming `what`.
void check_scalar_on(const char* op, const char* what, const Tensor& tensor, DType dtype, Device device) {
  MG_CHECK(tensor.numel() == 1 && tensor.dtype() == dtype && tensor.device() == device, op, ": ", what,
           " must be a one-element ", dtype, " tensor on ", device, " (the parameters' device); got ", tensor.sizes(),
           " ", tensor.dtype(), " on ", tensor.device());
}

}  // namespace

void increment_steps(std::span<const Tensor> steps, const float* found_inf, cudaStream_t stream) {
  for (size_t begin = 0; begin < steps.size(); begin += kStepsPerLaunch) {
    StepList list{};
    list.count = static_cast<int>(std::min<size_t>(kStepsPerLaunch, steps.size() - begin));
    for (int t = 0; t < list.count; ++t) list.step[t] = steps[begin + t].data_ptr<float>();
    increment_steps_kernel<<<1, kStepsPerLaunch, 0, stream>>>(list, found_inf);
    MG_CUDA_CHECK_LAUNCH();
  }
}

HyperPointers hyper_pointers(const char* op, const Tensor* found_inf, const Tensor* lr_on_device, Device device) {
  HyperPointers pointers{nullptr, nullptr};
  if (found_inf != nullptr) {
    check_scalar_on(op, "found_inf", *found_inf, DType::Float32, device);
    pointers.found_inf = found_inf->data_ptr<float>();
  }
  if (lr_on_device != nullptr) {
    check_scalar_on(op, "lr_on_device", *lr_on_device, DType::Float64, device);
    pointers.lr = lr_on_device->data_ptr<double>();
  }
  return pointers;
}

namespace {

// The update of every parameter of `lists` (see check_lists) in few launches: increments
// the counters in `steps`, then calls launch.template operator()<T>(packed, blocks, stream,
// pointers) for each group of up to kTensorsPerLaunch<kLists> non-empty tensors (one
// launch for any parameter group of a GPT-2; T the parameters' device element type,
// pointers the skip flag's and the device learning rate's, each null where unset). Empty
// tensors are skipped (their counters were still incremented, as on the CPU).
template <int kLists, class Launch>
void optimizer_apply(const char* op, const std::array<std::span<const Tensor>, kLists>& lists,
                     const std::array<bool, kLists>& optional, std::span<const Tensor> steps, bool needs_steps,
                     const Tensor* found_inf, const Tensor* lr_on_device, Launch launch) {
  check_lists<kLists>(op, lists, optional, steps, needs_steps);
  std::span<const Tensor> params = lists[0];
  if (params.empty()) return;
  Device device = params[0].device();
  const HyperPointers pointers = hyper_pointers(op, found_inf, lr_on_device, device);
  DeviceGuard guard(device);  // kernels launch on the current device
  cudaStream_t stream = current_stream(device);
  increment_steps(steps, pointers.found_inf, stream);
  launch_multi_tensor<kLists>(op, lists, steps, stream,
                              [&]<class T>(const TensorLists<kLists>& packed, unsigned blocks, cudaStream_t on) {
                                launch.template operator()<T>(packed, blocks, on, pointers);
                              });
}

// ---- SGD ----

struct SgdConstants {
  double lr, momentum, weight_decay, undampened;
  bool nesterov, first_step;
};
static_assert(kFitsBesideLists<SgdConstants, HyperPointers>, "sgd_kernel's arguments must fit one launch");

// One element of the update, with the CPU's arithmetic (core/optimizer_formulas.h).
template <class T, class C>
__host__ __device__ __forceinline__ void sgd_update(T* p, const T* g, T* buf, int64_t i, const SgdConstants& k) {
  const optimizer_formulas::SgdCoefficients<C> coefficients{.lr = static_cast<C>(k.lr),
                                                            .momentum = static_cast<C>(k.momentum),
                                                            .weight_decay = static_cast<C>(k.weight_decay),
                                                            .undampened = static_cast<C>(k.undampened),
                                                            .nesterov = k.nesterov,
                                                            .first_step = k.first_step};
  C buffer = buf != nullptr && !k.first_step ? to_compute<C>(buf[i]) : C(0);
  p[i] = from_compute<T>(
      optimizer_formulas::sgd_element(to_compute<C>(p[i]), to_compute<C>(g[i]), buf != nullptr, buffer, coefficients));
  if (buf != nullptr) buf[i] = from_compute<T>(buffer);
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    sgd_kernel(TensorLists<3> lists, SgdConstants constants, HyperPointers pointers) {
  if (overflowed(pointers.found_inf)) return;
  if (pointers.lr != nullptr) constants.lr = *pointers.lr;
  using C = device_compute_t<T>;
  BlockWork work = block_work(lists);
  T* p = static_cast<T*>(lists.data[0][work.tensor]);
  const T* g = static_cast<const T*>(lists.data[1][work.tensor]);
  T* buf = static_cast<T*>(lists.data[2][work.tensor]);
  for (int64_t i = work.begin + threadIdx.x; i < work.end; i += blockDim.x) sgd_update<T, C>(p, g, buf, i, constants);
}

// ---- Adam / AdamW ----

static_assert(kFitsBesideLists<AdamConstants, HyperPointers>, "adam_kernel's arguments must fit one launch");

template <class T, class C>
__host__ __device__ __forceinline__ void adam_update(T* p, const T* g, T* m, T* v, T* v_max, int64_t i,
                                                     const AdamConstants& k, const AdamStepScalars& scalars) {
  const optimizer_formulas::AdamCoefficients<C> coefficients = adam_coefficients<C>(k, scalars);
  C first = to_compute<C>(m[i]), second = to_compute<C>(v[i]);
  C max_second = v_max != nullptr ? to_compute<C>(v_max[i]) : C(0);
  C updated = optimizer_formulas::adam_element(to_compute<C>(p[i]), to_compute<C>(g[i]), first, second,
                                               v_max != nullptr ? &max_second : nullptr, coefficients);
  m[i] = from_compute<T>(first);
  v[i] = from_compute<T>(second);
  if (v_max != nullptr) v_max[i] = from_compute<T>(max_second);
  p[i] = from_compute<T>(updated);
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    adam_kernel(TensorLists<5> lists, AdamConstants constants, HyperPointers pointers) {
  if (overflowed(pointers.found_inf)) return;  // every thread of the block, before __syncthreads
  read_lr_on_device(constants, pointers.lr);
  using C = device_compute_t<T>;
  BlockWork work = block_work(lists);
  __shared__ AdamStepScalars scalars;
  if (threadIdx.x == 0) scalars = adam_step_scalars(constants, *lists.step[work.tensor]);
  __syncthreads();
  AdamStepScalars block_scalars = scalars;
  T* p = static_cast<T*>(lists.data[0][work.tensor]);
  const T* g = static_cast<const T*>(lists.data[1][work.tensor]);
  T* m = static_cast<T*>(lists.data[2][work.tensor]);
  T* v = static_cast<T*>(lists.data[3][work.tensor]);
  T* v_max = static_cast<T*>(lists.data[4][work.tensor]);
  for (int64_t i = work.begin + threadIdx.x; i < work.end; i += blockDim.x) {
    adam_update<T, C>(p, g, m, v, v_max, i, constants, block_scalars);
  }
}

// ---- Adagrad ----

struct AdagradConstants {
  double lr, lr_decay, weight_decay, eps;
};
static_assert(kFitsBesideLists<AdagradConstants, HyperPointers>, "adagrad_kernel's arguments must fit one launch");

// The decayed learning rate from the (already incremented) step count, in double.
__host__ __device__ __forceinline__ double adagrad_clr(const AdagradConstants& k, double step_count) {
  return k.lr / (1.0 + (step_count - 1.0) * k.lr_decay);
}

template <class T, class C>
__host__ __device__ __forceinline__ void adagrad_update(T* p, const T* g, T* sum, int64_t i, const AdagradConstants& k,
                                                        double decayed_lr) {
  C accumulated = to_compute<C>(sum[i]);
  p[i] = from_compute<T>(optimizer_formulas::adagrad_element(to_compute<C>(p[i]), to_compute<C>(g[i]), accumulated,
                                                             static_cast<C>(decayed_lr), static_cast<C>(k.weight_decay),
                                                             static_cast<C>(k.eps)));
  sum[i] = from_compute<T>(accumulated);
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    adagrad_kernel(TensorLists<3> lists, AdagradConstants constants, HyperPointers pointers) {
  if (overflowed(pointers.found_inf)) return;
  if (pointers.lr != nullptr) constants.lr = *pointers.lr;
  using C = device_compute_t<T>;
  BlockWork work = block_work(lists);
  double decayed_lr = adagrad_clr(constants, *lists.step[work.tensor]);  // one cached load per thread
  T* p = static_cast<T*>(lists.data[0][work.tensor]);
  const T* g = static_cast<const T*>(lists.data[1][work.tensor]);
  T* sum = static_cast<T*>(lists.data[2][work.tensor]);
  for (int64_t i = work.begin + threadIdx.x; i < work.end; i += blockDim.x) {
    adagrad_update<T, C>(p, g, sum, i, constants, decayed_lr);
  }
}

}  // namespace

void sgd_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> momentum_buffers,
              const SgdHyper& hyper) {
  SgdConstants constants{.lr = hyper.lr,
                         .momentum = hyper.momentum,
                         .weight_decay = hyper.weight_decay,
                         .undampened = 1.0 - hyper.dampening,
                         .nesterov = hyper.nesterov,
                         .first_step = hyper.first_step};
  optimizer_apply<3>("sgd_step", {params, grads, momentum_buffers}, /*optional=*/{false, false, true},
                     /*steps=*/{}, /*needs_steps=*/false, hyper.found_inf, hyper.lr_on_device,
                     [&]<class T>(const TensorLists<3>& lists, unsigned blocks, cudaStream_t stream,
                                  HyperPointers pointers) {
                       sgd_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(lists, constants, pointers);
                     });
}

void adam_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> exp_avgs,
               std::span<const Tensor> exp_avg_sqs, std::span<const Tensor> max_exp_avg_sqs,
               std::span<const Tensor> steps, const AdamHyper& hyper) {
  const AdamConstants constants = adam_constants(hyper);
  optimizer_apply<5>("adam_step", {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs},
                     /*optional=*/{false, false, false, false, true}, steps, /*needs_steps=*/true, hyper.found_inf,
                     hyper.lr_on_device,
                     [&]<class T>(const TensorLists<5>& lists, unsigned blocks, cudaStream_t stream,
                                  HyperPointers pointers) {
                       adam_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(lists, constants, pointers);
                     });
}

void adagrad_step(std::span<const Tensor> params, std::span<const Tensor> grads, std::span<const Tensor> state_sums,
                  std::span<const Tensor> steps, const AdagradHyper& hyper) {
  AdagradConstants constants{
      .lr = hyper.lr, .lr_decay = hyper.lr_decay, .weight_decay = hyper.weight_decay, .eps = hyper.eps};
  optimizer_apply<3>("adagrad_step", {params, grads, state_sums},
                     /*optional=*/{false, false, false}, steps, /*needs_steps=*/true, hyper.found_inf,
                     hyper.lr_on_device,
                     [&]<class T>(const TensorLists<3>& lists, unsigned blocks, cudaStream_t stream,
                                  HyperPointers pointers) {
                       adagrad_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(lists, constants, pointers);
                     });
}

}  // namespace mg::cuda
