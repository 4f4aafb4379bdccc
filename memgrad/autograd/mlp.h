// autograd/mlp.h — a transformer's MLP, y = c_proj(gelu(c_fc(x))), as one differentiable op.
#pragma once

#include "memgrad/autograd/unary.h"
#include "memgrad/core/tensor.h"

namespace mg {

// linear(gelu(linear(x, fc_weight, fc_bias), approximate), proj_weight, proj_bias) in one
// node: x (*, in), fc_weight (hidden, in), fc_bias (hidden), proj_weight (out, hidden),
// proj_bias (out); either bias may be undefined. The values are the chain's (on the CPU bit
// for bit); what differs is the memory and the kernels:
//   - forward: the first product and its gelu in one kernel (linear_gelu_forward: on CUDA
//     cuBLASLt's GELU_AUX_BIAS epilogue, tanh form), then the second product;
//   - saved: x, the pre-activation (hidden wide) and the two weights, NOT gelu's output:
//     backward recomputes it (one elementwise pass, TEMPORARY), so every call keeps
//     rows x hidden elements fewer ACTIVATION bytes than the chain, which saves both;
//   - backward: the second product's input gradient, gelu's gradient and the first bias's
//     gradient through one kernel entry (linear_gelu_backward: on CUDA the unfused steps,
//     faster there than cuBLASLt's DGELU_BGRAD epilogue, cuda/linear_gelu.cpp).
// Under autocast the products run in the autocast dtype, as linear's do. Under a selective
// checkpoint both products are OpKind::Matmul results (pre-activation and y), kept and
// replayed as linear's.
Tensor mlp(const Tensor& x, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
           const Tensor& proj_bias, GeluApproximate approximate);

}  // namespace mg
