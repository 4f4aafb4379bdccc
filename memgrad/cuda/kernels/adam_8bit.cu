// cuda/kernels/adam_8bit.cu — the fused CUDA update of Adam/AdamW with 8-bit moments
// (adam_8bit_step in core/kernel_list.h): one thread block per quantisation block, which
// dequantises both moments, updates the parameter with core/optimizer_formulas.h's
// adam_8bit_element (the CPU kernel's arithmetic), finds the block's new absmax by a
// max-reduction, and requantises (core/quantize_8bit.h), reading and writing each byte of
// state once.
//
// NOTE: one launch per parameter, after one launch that increments every step counter
// (optimizer.cu's note says why the counters need it); the multi-tensor packing of
// multi_tensor_apply.cuh assumes 4,096-element chunks and lists of one dtype, which the
// uint8 codes and per-block absmaxes are not. A GPT-2 has some 50 tensors large enough for
// 8-bit state, so a step costs about 50 launches more than adam_step's one.
//
// The new moments stay in registers between the update and the requantisation: at most
// kMaxBlockSize / kThreadsPerBlock = 16 per thread, in fully unrolled loops so that the
// arrays are never spilled to local memory. The two 256-value maps are copied into shared
// memory, where the binary search reads them (2 KB of kernel arguments, then 2 KB shared).
#include <algorithm>
#include <span>

#include "memgrad/core/optimizer_formulas.h"
#include "memgrad/core/quantize_8bit.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/optimizer_steps.cuh"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

inline constexpr int kValuesPerThread = static_cast<int>(quantize_8bit::kMaxBlockSize / kThreadsPerBlock);
static_assert(kValuesPerThread * kThreadsPerBlock == quantize_8bit::kMaxBlockSize);

// One parameter's tensors.
template <class T>
struct Adam8bitTensors {
  T* param;
  const T* grad;
  uint8_t* exp_avg_codes;
  uint8_t* exp_avg_sq_codes;
  float* exp_avg_absmax;     // one per block
  float* exp_avg_sq_absmax;  // one per block
  const float* step;
  int64_t numel;
};

__device__ __forceinline__ float max_of(float a, float b) { return fmaxf(a, b); }

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    adam_8bit_kernel(Adam8bitTensors<T> tensors, int block_size, AdamConstants constants, HyperPointers pointers,
                     quantize_8bit::QuantizationMap signed_map, quantize_8bit::QuantizationMap unsigned_map) {
  if (overflowed(pointers.found_inf)) return;  // every thread of the block, before __syncthreads
  read_lr_on_device(constants, pointers.lr);
  using C = device_compute_t<T>;
  __shared__ float signed_values[quantize_8bit::kCodes];
  __shared__ float unsigned_values[quantize_8bit::kCodes];
  __shared__ AdamStepScalars scalars;
  for (int code = threadIdx.x; code < quantize_8bit::kCodes; code += blockDim.x) {
    signed_values[code] = signed_map.values[code];
    unsigned_values[code] = unsigned_map.values[code];
  }
  if (threadIdx.x == 0) scalars = adam_step_scalars(constants, *tensors.step);
  __syncthreads();
  const optimizer_formulas::AdamCoefficients<C> k = adam_coefficients<C>(constants, scalars);

  const int64_t block = blockIdx.x;
  const int64_t begin = block * block_size;
  const int count = static_cast<int>(min(static_cast<int64_t>(block_size), tensors.numel - begin));
  // Read before thread 0 overwrites them below (after the reductions' __syncthreads).
  const float first_absmax = tensors.exp_avg_absmax[block];
  const float second_absmax = tensors.exp_avg_sq_absmax[block];

  float first[kValuesPerThread], second[kValuesPerThread];
  float first_max = 0.0f, second_max = 0.0f;
#pragma unroll
  for (int r = 0; r < kValuesPerThread; ++r) {
    const int j = static_cast<int>(threadIdx.x) + r * kThreadsPerBlock;
    if (j < count) {
      const int64_t i = begin + j;
      tensors.param[i] = from_compute<T>(optimizer_formulas::adam_8bit_element(
          to_compute<C>(tensors.param[i]), to_compute<C>(tensors.grad[i]), tensors.exp_avg_codes[i],
          tensors.exp_avg_sq_codes[i], first_absmax, second_absmax, signed_values, unsigned_values, first[r],
          second[r], k));
      first_max = fmaxf(first_max, fabsf(first[r]));
      second_max = fmaxf(second_max, second[r]);
    }
  }
  first_max = reduce_across_row(first_max, max_of);
  second_max = reduce_across_row(second_max, max_of);
  if (threadIdx.x == 0) {
    tensors.exp_avg_absmax[block] = first_max;
    tensors.exp_avg_sq_absmax[block] = second_max;
  }
#pragma unroll
  for (int r = 0; r < kValuesPerThread; ++r) {
    const int j = static_cast<int>(threadIdx.x) + r * kThreadsPerBlock;
    if (j < count) {
      tensors.exp_avg_codes[begin + j] = quantize_8bit::quantize(first[r], first_max, signed_values);
      tensors.exp_avg_sq_codes[begin + j] = quantize_8bit::quantize(second[r], second_max, unsigned_values);
    }
  }
}

}  // namespace

void adam_8bit_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                    std::span<const Tensor> exp_avg_codes, std::span<const Tensor> exp_avg_sq_codes,
                    std::span<const Tensor> exp_avg_absmaxes, std::span<const Tensor> exp_avg_sq_absmaxes,
                    std::span<const Tensor> steps, const AdamHyper& hyper, int64_t block_size) {
  for (size_t list_size : {grads.size(), exp_avg_codes.size(), exp_avg_sq_codes.size(), exp_avg_absmaxes.size(),
                           exp_avg_sq_absmaxes.size(), steps.size()}) {
    MG_CHECK(list_size == params.size(), "adam_8bit_step: got ", params.size(), " parameters but a list of ",
             list_size, " tensors");
  }
  MG_CHECK(block_size >= quantize_8bit::kMinBlockSize && block_size <= quantize_8bit::kMaxBlockSize,
           "adam_8bit_step: block_size ", block_size, " is outside [", quantize_8bit::kMinBlockSize, ", ",
           quantize_8bit::kMaxBlockSize, "]");
  if (params.empty()) return;
  const Device device = params[0].device();
  const HyperPointers pointers = hyper_pointers("adam_8bit_step", hyper.found_inf, hyper.lr_on_device, device);
  DeviceGuard guard(device);  // kernels launch on the current device
  cudaStream_t stream = current_stream(device);
  increment_steps(steps, pointers.found_inf, stream);
  const AdamConstants constants = adam_constants(hyper);
  dispatch_floating(params[0].dtype(), "adam_8bit_step", [&]<class HostT>() {
    using T = device_t<HostT>;
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t numel = params[i].numel();
      if (numel == 0) continue;
      const Adam8bitTensors<T> tensors{.param = static_cast<T*>(params[i].raw_data()),
                                       .grad = static_cast<const T*>(grads[i].raw_data()),
                                       .exp_avg_codes = exp_avg_codes[i].data_ptr<uint8_t>(),
                                       .exp_avg_sq_codes = exp_avg_sq_codes[i].data_ptr<uint8_t>(),
                                       .exp_avg_absmax = exp_avg_absmaxes[i].data_ptr<float>(),
                                       .exp_avg_sq_absmax = exp_avg_sq_absmaxes[i].data_ptr<float>(),
                                       .step = steps[i].data_ptr<float>(),
                                       .numel = numel};
      const auto blocks = static_cast<unsigned>(quantize_8bit::block_count(numel, block_size));
      adam_8bit_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(tensors, static_cast<int>(block_size), constants,
                                                                  pointers, quantize_8bit::kSignedMap,
                                                                  quantize_8bit::kUnsignedMap);
      MG_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace mg::cuda
