// core/cpu/host_adam.h — Adam/AdamW over float32 host arrays, as fast as the memory allows:
// the update that an offloaded optimizer (optim/offloaded_adam.h) runs on the host while
// the parameters live on a GPU (ZeRO-Offload, Ren et al. 2021).
//
// One pass reads the gradient (float32, float16 or bfloat16), updates the float32 master
// parameter and moments in place and, where asked, writes the updated parameter rounded
// to its own dtype (the copy that goes back to the device, or a CPU parameter itself).
// Chunks are spread over OpenMP threads; each chunk runs on the widest vector path the CPU
// has (AVX-512F, AVX2 with F16C, else scalar), chosen at run time so that a binary built
// for any x86-64 uses what the machine it runs on offers.
//
// Every path computes optimizer_formulas.h's adam_element operation by operation, each
// rounded to float32 (no fused multiply-add: this file and optimizer_kernels.cpp are
// built with -ffp-contract=off), so all paths and the CPU Adam kernel agree bit for bit.
#pragma once

#include <cstdint>

#include "memgrad/core/dtype.h"
#include "memgrad/core/cpu/optimizer_steps.h"  // adam_coefficients
#include "memgrad/core/kernels.h"
#include "memgrad/core/optimizer_formulas.h"

namespace mg::cpu {

enum class HostAdamPath { Scalar, Avx2, Avx512 };

// Whether this CPU runs `path`; the widest path it runs; a path's name ("scalar", "avx2",
// "avx512").
bool host_adam_path_available(HostAdamPath path);
HostAdamPath best_host_adam_path();
const char* host_adam_path_name(HostAdamPath path);

// One parameter's host arrays, `count` elements each.
struct HostAdamArrays {
  float* master_param;
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq = nullptr;  // amsgrad only
  const void* grad;
  DType grad_dtype;                 // Float32, Float16 or BFloat16
  void* param_out = nullptr;        // optional: the updated parameter rounded to param_out_dtype
  DType param_out_dtype = DType::Float32;
  int64_t count;
};

// Updates `arrays` in place; `path` must be one the CPU runs (tests pass each in turn).
void host_adam_update(const HostAdamArrays& arrays, const optimizer_formulas::AdamCoefficients<float>& k,
                      HostAdamPath path = best_host_adam_path());

}  // namespace mg::cpu
