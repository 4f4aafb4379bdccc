// core/kernels.h — the device kernel interface: one table of functions per device type.
//
// Differentiable ops in autograd/ compute through kernels(device).<kernel>(...). Every
// kernel is listed once, with its contract, in core/kernel_list.h; the CPU table lives in
// core/cpu/ (Eigen), the CUDA table in cuda/. This header holds the table and the types
// its kernels take.
#pragma once

#include <cstdint>
#include <span>

#include "memgrad/core/channel_sums.h"
#include "memgrad/core/device.h"
#include "memgrad/core/elementwise_ops.h"
#include "memgrad/core/shape.h"

namespace mg {

class Tensor;

// Every elementwise op, named once in core/elementwise_ops.h's lists (with its formula).
enum class UnaryOp : uint8_t {
#define MG_ENUMERATOR(name, ...) name,
  MG_UNARY_OPS(MG_ENUMERATOR)
};
enum class BinaryOp : uint8_t {
  MG_BINARY_OPS(MG_ENUMERATOR)
#undef MG_ENUMERATOR
};

// Whether op's output is bool (Eq, Ne, Lt, Le, Gt, Ge).
bool is_comparison(BinaryOp op);

enum class ReduceOp : uint8_t { Sum, Max, Min };

// Geometry of a 2-D convolution or pooling window (NCHW tensors).
struct Window2d {
  int64_t kernel_h = 1, kernel_w = 1;  // pooling only: convolution takes them from the weight
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;              // convolution only
  bool ceil_mode = false;          // pooling only
  bool count_include_pad = true;   // avg pooling only
};

// Random number state handed to kernels: Philox4x32-10 key and the counter to start at.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in Philox blocks (4 x 32-bit words); element i uses block offset + i
  // Null, except for a CUDA kernel recorded into a captured step (cuda/captured_step.h):
  // then device memory holding {seed, base offset}, written before each replay, and
  // `offset` counts from that base, so every replay draws new numbers (philox_block).
  const uint64_t* captured_base = nullptr;
};

// Hyper-parameters of the fused optimizer updates (see optim/): one update call reads them
// by value, so changing the learning rate between steps costs nothing on the device.
// Each ends with two optional tensors on the parameters' device:
//   found_inf, null unless a GradScaler steps (amp/grad_scaler.h): a one-element float32;
//     where it holds a non-zero value the update leaves parameters, state and step
//     counters as they were. The device reads it, so skipping a step after an overflow
//     needs no host sync.
//   lr_on_device, null unless the step may be captured as a CUDA graph (the optimizer
//     makes it during a CapturedStep's warm-up): a one-element float64 that the update
//     reads instead of lr, so that replays see the learning rate the host set last.
struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer was just created: it starts as the gradient
  const Tensor* found_inf = nullptr;
  const Tensor* lr_on_device = nullptr;
};
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW: param *= 1 - lr * weight_decay, not grad += wd * param
  bool amsgrad;
  const Tensor* found_inf = nullptr;
  const Tensor* lr_on_device = nullptr;
};
struct AdagradHyper {
  double lr, lr_decay, weight_decay, eps;
  const Tensor* found_inf = nullptr;
  const Tensor* lr_on_device = nullptr;
};

// Scaled dot-product attention computed tile by tile with an online softmax
// (FlashAttention-2), never materialising the (Tq, Tk) matrix.
struct AttentionParams {
  double scale;      // multiplies q . k (PyTorch's default 1 / sqrt(head_dim) is the caller's)
  bool is_causal;    // query i attends to keys j <= i (PyTorch's top-left alignment)
  double dropout_p;  // probability of dropping each attention weight; kept ones scale by 1/(1-p)
  // NOTE: the dropout mask is the one dropout() draws on the contiguous (B, H, Tq, Tk)
  // matrix of probabilities: weight (b, h, i, j) is kept when
  //   uniform_from_bits(philox_block(rng, ((b * H + h) * Tq + i) * Tk + j)[0]) >= float(p),
  // so the fused and the math path draw the same mask from the same generator state (the
  // caller reserves B * H * Tq * Tk blocks either way).
  PhiloxState rng;
};

// One function pointer per kernel of core/kernel_list.h (their contracts are there).
struct KernelTable {
#define MG_KERNEL(name, result, parameters) result(*name) parameters;
#include "memgrad/core/kernel_list.h"
};

// The kernel table of a device type; throws mg::Error when memgrad has none for it.
const KernelTable& kernels(Device device);

// Copies between devices (or within one); sizes and dtypes must match. Between host and a
// CUDA device the copy runs on the device's current stream and waits for it unless
// `non_blocking` and the host side is pinned (the caller then synchronises before reading
// a pinned destination).
void copy_across_devices(const Tensor& source, const Tensor& destination,
                         bool non_blocking = false);

}  // namespace mg
