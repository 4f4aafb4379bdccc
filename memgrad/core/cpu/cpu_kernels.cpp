// core/cpu/cpu_kernels.cpp — the CPU kernel table: every entry of core/kernel_list.h.
#include "memgrad/core/cpu/cpu_kernels.h"

namespace mg::cpu {

const KernelTable& kernel_table() {
  static const KernelTable table{
#define MG_KERNEL(name, result, parameters) .name = name,
#include "memgrad/core/kernel_list.h"
  };
  return table;
}

}  // namespace mg::cpu
