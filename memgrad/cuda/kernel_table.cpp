// cuda/kernel_table.cpp — the CUDA kernel table: every entry of core/kernel_list.h, filled
// with the implementations cuda/kernels/cuda_kernels.h declares.
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"

namespace mg::cuda {

const KernelTable& kernel_table() {
  static const KernelTable table{
#define MG_KERNEL(name, result, parameters) .name = name,
#include "memgrad/core/kernel_list.h"
  };
  return table;
}

}  // namespace mg::cuda
