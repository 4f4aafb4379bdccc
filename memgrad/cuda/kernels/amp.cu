// cuda/kernels/amp.cu — the CUDA side of loss scaling (amp/grad_scaler.h): unscaling every
// gradient while looking for inf/NaN (multi-tensor, a few launches for a whole model), and
// the scale's update after a step (one thread). Neither synchronises: found_inf, the scale
// and the growth tracker stay on the device, where the optimizer kernels read found_inf.
// Without found_inf the unscale is a plain multi-tensor multiply by a device scalar, which
// is how clip_grad_norm_ applies its coefficient.
//
// The arithmetic is core/cpu/amp_kernels.cpp's, which follows PyTorch's kernels.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/multi_tensor_apply.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

// S: the factor's type (float32 or float64); found_inf null: scale only.
template <class T, class S>
__global__ void __launch_bounds__(kThreadsPerBlock)
    unscale_kernel(TensorLists<1> lists, float* found_inf, const S* inv_scale) {
  using C = device_compute_t<T>;
  BlockWork work = block_work(lists);
  T* g = static_cast<T*>(lists.data[0][work.tensor]);
  const C inverse = static_cast<C>(*inv_scale);
  bool non_finite = false;
  for (int64_t i = work.begin + threadIdx.x; i < work.end; i += blockDim.x) {
    const C value = to_compute<C>(g[i]);
    // NOTE: checked before scaling, as PyTorch does.
    non_finite = non_finite || !isfinite(value);
    g[i] = from_compute<T>(inverse == C(1) ? value : value * inverse);
  }
  // NOTE: a benign race: every thread that writes, writes 1.
  if (non_finite && found_inf != nullptr) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                    float growth_factor, float backoff_factor, int64_t growth_interval) {
  if (*found_inf != 0.0f) {
    *scale *= backoff_factor;
    *growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*growth_tracker) + 1;
  if (successful < growth_interval) {
    *growth_tracker = static_cast<int32_t>(successful);
    return;
  }
  const float grown = *scale * growth_factor;
  // A scale that would reach inf stays where it is.
  if (isfinite(grown)) *scale = grown;
  *growth_tracker = 0;
}

// A 0-d (or one-element) tensor of `dtype` on `device`, for the error messages of both entries.
void check_scalar(const char* op, const char* name, const Tensor& tensor, DType dtype, Device device) {
  MG_CHECK(tensor.numel() == 1 && tensor.dtype() == dtype && tensor.device() == device, op, ": ", name,
           " must be a one-element ", dtype, " tensor on ", device, "; got ", tensor.sizes(), " ", tensor.dtype(),
           " on ", tensor.device());
}

}  // namespace

void non_finite_check_and_unscale(std::span<const Tensor> grads, const Tensor& found_inf, const Tensor& inv_scale) {
  constexpr const char* kOp = "non_finite_check_and_unscale";
  if (grads.empty()) return;
  const Device device = grads[0].device();
  // Every group checked before any launch, so a refused call changes nothing.
  const std::vector<std::vector<Tensor>> groups = group_by_dtype(grads);
  for (const std::vector<Tensor>& group : groups) {
    MG_CHECK(group[0].device() == device, kOp, ": every gradient must be on one device; got ", device, " and ",
             group[0].device());
    check_lists<1>(kOp, {group}, /*optional=*/{false}, /*steps=*/{}, /*needs_steps=*/false);
  }
  if (found_inf.defined()) check_scalar(kOp, "found_inf", found_inf, DType::Float32, device);
  check_scalar(kOp, "inv_scale", inv_scale, inv_scale.dtype() == DType::Float64 ? DType::Float64 : DType::Float32,
               device);
  DeviceGuard guard(device);
  float* found_inf_data = found_inf.defined() ? found_inf.data_ptr<float>() : nullptr;
  auto unscale = [&]<class S>() {
    const S* inv_scale_data = inv_scale.data_ptr<S>();
    for (const std::vector<Tensor>& group : groups) {
      launch_multi_tensor<1>(kOp, {group}, /*steps=*/{}, current_stream(device),
                             [&]<class T>(const TensorLists<1>& lists, unsigned blocks, cudaStream_t stream) {
                               unscale_kernel<T, S><<<blocks, kThreadsPerBlock, 0, stream>>>(lists, found_inf_data,
                                                                                            inv_scale_data);
                             });
    }
  };
  if (inv_scale.dtype() == DType::Float64) {
    unscale.template operator()<double>();
  } else {
    unscale.template operator()<float>();
  }
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  constexpr const char* kOp = "update_scale";
  Device device = scale.device();
  check_scalar(kOp, "scale", scale, DType::Float32, device);
  check_scalar(kOp, "growth_tracker", growth_tracker, DType::Int32, device);
  check_scalar(kOp, "found_inf", found_inf, DType::Float32, device);
  DeviceGuard guard(device);
  // NOTE: the factors travel as float32, as PyTorch's kernel takes them.
  update_scale_kernel<<<1, 1, 0, current_stream(device)>>>(
      scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.data_ptr<float>(),
      static_cast<float>(growth_factor), static_cast<float>(backoff_factor), growth_interval);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace mg::cuda
