// cuda/lt_matmul.h — products through cuBLASLt with an epilogue: the GEMM adds a bias,
// applies GELU (keeping its input) or GELU's gradient (and sums the bias gradient) while
// the product is still in registers, instead of a second kernel that reads and writes the
// whole result again. The kernel table's linear_forward on CUDA is here; linear_gelu_forward
// (cuda/linear_gelu.cpp) uses lt_matmul below.
#pragma once

#include <cstdint>

#include "memgrad/core/tensor.h"

namespace mg::cuda {

// output (rows, out) = input (rows, in) @ weight (out, in)^T + bias (out); all contiguous,
// one floating dtype, one device. float32 computes in float32, or TF32 when allow_tf32();
// float16 / bfloat16 accumulate in float32; float64 in float64. Where cuBLASLt offers no
// algorithm for the shapes and alignments, it runs cuBLAS's GEMM and then the bias add.
void linear_forward(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& output);

// What the epilogue does to the product P = op(A) B (cuBLASLt's names in brackets).
enum class LtEpilogue {
  Bias,             // D = P + bias                                        [BIAS]
  GeluAux,          // aux = P, D = gelu_tanh(P)                          [GELU_AUX]
  GeluAuxBias,      // aux = P + bias, D = gelu_tanh(aux)                 [GELU_AUX_BIAS]
  DGelu,            // D = P * gelu_tanh'(aux)                            [DGELU]
  DGeluBiasGrad,    // D = P * gelu_tanh'(aux), bias = D summed over n    [DGELU_BGRAD]
};
// NOTE: the DGelu forms are not in linear_gelu_backward, whose unfused steps were faster on
// an H100 (cuda/linear_gelu.cpp); tests/cuda/test_cuda_mlp_timing.cpp times them against
// those steps.

// One product in cuBLASLt's column-major terms: D (m, n) = op(A) (m, k) @ B (k, n), A stored
// as (k, m) when transpose_a, else (m, k); B (k, n), D and aux (m, n); bias (m). Every
// matrix packed (leading dimension = its row count). A row-major (r, c) tensor is the
// column-major (c, r) matrix, so a caller with row-major tensors passes them with their
// roles swapped (see linear_forward). All contiguous, one dtype, one device.
struct LtProduct {
  Tensor a;
  bool transpose_a = false;
  Tensor b;
  Tensor d;
  int64_t m = 0, n = 0, k = 0;
  LtEpilogue epilogue = LtEpilogue::Bias;
  Tensor bias;  // Bias forms: read; DGeluBiasGrad: written
  Tensor aux;   // Gelu forms: written; DGelu forms: read
};

// Runs `product` on the current stream of its device and returns true, or returns false
// having run nothing where cuBLASLt cannot: a size-1 or empty dim, a dim over INT32_MAX, a
// GELU epilogue on float64 or with m not a multiple of 8 (cuBLASLt's rule for the aux
// matrix's leading dimension), or no algorithm from the heuristic. The caller then runs
// its unfused form.
bool lt_matmul(const LtProduct& product);

}  // namespace mg::cuda
