// optim/adam_8bit.h — Adam8bit and AdamW8bit: Adam and AdamW whose two moments are kept in
// 8 bits, quantised block-wise (Dettmers et al. 2022, "8-bit Optimizers via Block-wise
// Quantization"; bitsandbytes' Adam8bit / AdamW8bit). Each step runs one fused kernel
// (adam_8bit_step, core/kernel_list.h): per block of block_size elements it dequantises
// both moments, updates the parameter, and requantises them against the block's new
// absmax (core/quantize_8bit.h holds the maps and the error bound).
//
// Memory (OPTIMIZER_STATE) per parameter of n elements with 8-bit state:
//   exp_avg, exp_avg_sq   uint8 codes, n bytes each
//   exp_avg_absmax,       float32, 4 bytes per block each: ceil(n / block_size) blocks
//   exp_avg_sq_absmax
//   step                  a 4-byte float32 counter on the device
// so 2 + 8 / block_size bytes per element (2.004 at the default 2,048) against AdamW's 8
// for float32 parameters: 4x less state; against 4 for 16-bit parameters, 2x less.
// A parameter of fewer than min_8bit_size elements (4,096 by default, as bitsandbytes)
// keeps AdamW's state in its own dtype and is updated by adam_step: biases and norms are a
// tiny share of the bytes, and quantising them buys nothing.
//
// NOTE: no float32 master weights: a float16 or bfloat16 parameter is updated in float32
// and rounded back to its dtype, exactly as AdamW does it here. Master weights would cost
// 4 bytes per element, twice what the 8-bit state saves; train with float32 parameters
// under autocast (which is how memgrad does mixed precision) where updates must not round
// away.
//
// What differs from bitsandbytes: the maps follow the paper's dynamic tree (7 decades,
// 0 and 1 exact) as bitsandbytes' create_dynamic_map does, but ties between two codes go
// to the lower one, blocks follow the parameter's memory order, and the step counter is a
// per-parameter tensor on the device (as torch.optim keeps it) rather than a host integer,
// so GradScaler's skip and CUDA graphs need no sync. There is no amsgrad, no percentile
// clipping, no paged state and no per-parameter override of optim_bits.
#pragma once

#include <cstdint>

#include "memgrad/core/quantize_8bit.h"
#include "memgrad/optim/adam.h"

namespace mg::optim {

// Adam's options without amsgrad, plus the quantisation's; as with Adam and AdamW, the two
// differ only in weight decay's default.
template <class Defaults>
struct Adam8bitFamilyOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = Defaults::kWeightDecay;
  // Elements per absmax, in [64, 4096] (quantize_8bit.h's kMinBlockSize, kMaxBlockSize).
  int64_t block_size = quantize_8bit::kDefaultBlockSize;
  // Parameters with fewer elements keep 32-bit (their dtype's) moments.
  int64_t min_8bit_size = 4096;
};
using Adam8bitOptions = Adam8bitFamilyOptions<AdamDefaults>;
using AdamW8bitOptions = Adam8bitFamilyOptions<AdamWDefaults>;

class Adam8bit : public Optimizer {
 public:
  explicit Adam8bit(std::vector<Tensor> params, Adam8bitOptions options = {});
  // Several groups at once, in order (see optim/param_groups.h); at least one.
  explicit Adam8bit(std::vector<ParamGroupOptions<Adam8bitOptions>> groups);
  void add_param_group(std::vector<Tensor> params, Adam8bitOptions options);
  void step() override;
  // beta1, beta2, eps, weight_decay, block_size, min_8bit_size: a checkpoint is refused by
  // an optimizer that would quantise differently.
  std::vector<std::pair<std::string, double>> hyper_parameters(size_t group_index) const override;

  // For checkpoints (optim/state_dict.cpp): the number of absmax blocks of parameter
  // `param_index` (all_params() order), or 0 when its moments are kept in 32 bits.
  int64_t quantization_blocks(size_t param_index) const;

 protected:
  // The fused kernels read found_inf() on the device.
  bool skips_on_device() const override { return true; }

  // AdamW8bit's entry: the same algorithm with decoupled weight decay in every group.
  explicit Adam8bit(bool decoupled_weight_decay) : decoupled_weight_decay_(decoupled_weight_decay) {}

 private:
  bool decoupled_weight_decay_ = false;
  std::vector<Adam8bitOptions> options_;  // per group; their lr is the group's starting lr only
};

class AdamW8bit : public Adam8bit {
 public:
  explicit AdamW8bit(std::vector<Tensor> params, AdamW8bitOptions options = {});
  // Several groups at once, in order: what optim::weight_decay_groups() returns.
  explicit AdamW8bit(std::vector<ParamGroupOptions<AdamW8bitOptions>> groups);
  void add_param_group(std::vector<Tensor> params, AdamW8bitOptions options);
};

}  // namespace mg::optim
