// core/cpu/adam_8bit.cpp — the fused CPU update of Adam/AdamW with 8-bit moments
// (adam_8bit_step in core/kernel_list.h): per quantisation block, dequantise both moments,
// update the parameter with core/optimizer_formulas.h's adam_8bit_element (the CUDA
// kernel's arithmetic), then requantise the new moments against the block's new absmax
// (core/quantize_8bit.h). Blocks are independent, so OpenMP shares them among threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/optimizer_steps.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/optimizer_formulas.h"
#include "memgrad/core/quantize_8bit.h"

namespace mg::cpu {

namespace {

void update_adam_8bit(const Tensor& param, const Tensor& grad, const Tensor& exp_avg_codes,
                      const Tensor& exp_avg_sq_codes, const Tensor& exp_avg_absmax, const Tensor& exp_avg_sq_absmax,
                      const Tensor& step, const AdamHyper& hyper, int64_t block_size) {
  const double step_count = increment_step(step);
  const float* signed_map = quantize_8bit::kSignedMap.values;
  const float* unsigned_map = quantize_8bit::kUnsignedMap.values;
  dispatch_floating(param.dtype(), "adam_8bit_step", [&]<class T>() {
    using C = compute_t<T>;
    T* p = static_cast<T*>(param.raw_data());
    const T* g = static_cast<const T*>(grad.raw_data());
    uint8_t* m_codes = exp_avg_codes.data_ptr<uint8_t>();
    uint8_t* v_codes = exp_avg_sq_codes.data_ptr<uint8_t>();
    float* m_absmax = exp_avg_absmax.data_ptr<float>();
    float* v_absmax = exp_avg_sq_absmax.data_ptr<float>();
    const optimizer_formulas::AdamCoefficients<C> k = adam_coefficients<C>(hyper, step_count);
    const int64_t count = param.numel();
    const int64_t blocks = quantize_8bit::block_count(count, block_size);
#pragma omp parallel if (count >= kParallelGrain)
    {
      // One block's new moments, unquantised, until its absmax is known.
      std::vector<float> first(static_cast<size_t>(block_size)), second(static_cast<size_t>(block_size));
#pragma omp for schedule(static)
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t begin = block * block_size;
        const int64_t end = std::min(begin + block_size, count);
        float first_max = 0.0f, second_max = 0.0f;
        for (int64_t i = begin; i < end; ++i) {
          float& new_first = first[i - begin];
          float& new_second = second[i - begin];
          p[i] = static_cast<T>(optimizer_formulas::adam_8bit_element(
              static_cast<C>(p[i]), static_cast<C>(g[i]), m_codes[i], v_codes[i], m_absmax[block], v_absmax[block],
              signed_map, unsigned_map, new_first, new_second, k));
          first_max = std::max(first_max, std::fabs(new_first));
          second_max = std::max(second_max, new_second);
        }
        m_absmax[block] = first_max;
        v_absmax[block] = second_max;
        for (int64_t i = begin; i < end; ++i) {
          m_codes[i] = quantize_8bit::quantize(first[i - begin], first_max, signed_map);
          v_codes[i] = quantize_8bit::quantize(second[i - begin], second_max, unsigned_map);
        }
      }
    }
  });
}

}  // namespace

// On the CPU a list is updated one parameter after another: there is no launch to save.
void adam_8bit_step(std::span<const Tensor> params, std::span<const Tensor> grads,
                    std::span<const Tensor> exp_avg_codes, std::span<const Tensor> exp_avg_sq_codes,
                    std::span<const Tensor> exp_avg_absmaxes, std::span<const Tensor> exp_avg_sq_absmaxes,
                    std::span<const Tensor> steps, const AdamHyper& given, int64_t block_size) {
  if (overflowed(given.found_inf)) return;
  const AdamHyper hyper = with_lr_on_device(given);
  for (size_t i = 0; i < params.size(); ++i) {
    update_adam_8bit(params[i], grads[i], exp_avg_codes[i], exp_avg_sq_codes[i], exp_avg_absmaxes[i],
                     exp_avg_sq_absmaxes[i], steps[i], hyper, block_size);
  }
}

}  // namespace mg::cpu
