// core/cpu/cpu_kernels.h — the CPU implementations behind core/kernels.h's table, declared
// from core/kernel_list.h: one family per file in core/cpu/ (named after the kernels it
// holds), and cpu_kernels.cpp assembles the table.
#pragma once

#include "memgrad/core/kernels.h"
#include "memgrad/core/tensor.h"

namespace mg::cpu {

#define MG_KERNEL(name, result, parameters) result name parameters;
#include "memgrad/core/kernel_list.h"

const KernelTable& kernel_table();

}  // namespace mg::cpu
