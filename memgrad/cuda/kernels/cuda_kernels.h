// cuda/kernels/cuda_kernels.h — the CUDA implementations behind core/kernels.h's table,
// declared from core/kernel_list.h: one family per file in cuda/kernels/ (named after the
// kernels it holds; matmul and linear_forward in cuda/matmul.cpp and cuda/lt_matmul.cpp),
// and cuda/kernel_table.cpp assembles the table. Each launches on the current stream of
// the tensors' device and never synchronises.
#pragma once

#include <span>

#include "memgrad/core/kernels.h"
#include "memgrad/core/tensor.h"

namespace mg::cuda {

#define MG_KERNEL(name, result, parameters) result name parameters;
#include "memgrad/core/kernel_list.h"

// copy_fill.cu: {base.seed, base.offset} into `words` (two int64 on the device), where a
// captured step's random kernels read them (cuda/captured_step.h); by kernel argument, so
// without waiting.
void write_philox_base(const Tensor& words, PhiloxState base);

}  // namespace mg::cuda
