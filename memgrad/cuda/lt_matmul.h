// cuda/lt_matmul.h — a linear layer's forward in one cuBLASLt call: the GEMM's epilogue adds
// the bias while the product is still in registers, instead of a second kernel that reads
// and writes the whole output again (the kernel table's linear_forward on CUDA).
#pragma once

#include "memgrad/core/tensor.h"

namespace mg::cuda {

// output (rows, out) = input (rows, in) @ weight (out, in)^T + bias (out); all contiguous,
// one floating dtype, one device. float32 computes in float32, or TF32 when allow_tf32();
// float16 / bfloat16 accumulate in float32; float64 in float64. Where cuBLASLt offers no
// algorithm for the shapes and alignments, it runs cuBLAS's GEMM and then the bias add.
void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output);

}  // namespace mg::cuda
