// distributed/flat_parameter_shards.h — FlatParameterShards: one parameter group laid out
// in a single flat buffer, cut into one equal, contiguous shard per rank (ZeRO's layout).
//
//   flat buffer (padded_numel elements):  | p0 ......| p1 ...| p2 ....|pad|
//   shards (world size 4):                | rank 0 | rank 1 | rank 2 | rank 3 |
//
// The parameters are placed in group order, each in its own layout (a channels-last
// weight keeps its strides), and the buffer is padded with zeros to a multiple of the
// world size, so every rank's shard has padded_numel / world_size elements: a shard may
// cut a parameter anywhere, and the last one may hold padding only.
//
// At construction each parameter becomes a view of its part of the buffer through
// Tensor::set_data, keeping its autograd identity (the module, the autograd graph and
// every handle see the moved parameter). Gradients can become views of a second flat
// buffer the same way (flat_gradients), which a reduce-scatter reads without a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "memgrad/core/memory_category.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"

namespace mg::distributed {

class FlatParameterShards {
 public:
  // Moves `params` (leaves of one dtype on one device; the caller checks) into a new
  // PARAMETER buffer; their values are kept. `rank` of `world_size` owns one shard.
  FlatParameterShards(std::vector<Tensor> params, int rank, int world_size);

  const std::vector<Tensor>& params() const { return params_; }
  int64_t numel() const { return numel_; }                // the parameters' elements
  int64_t padded_numel() const { return padded_numel_; }  // numel rounded up to world_size
  int64_t shard_numel() const { return shard_numel_; }    // padded_numel / world_size
  int64_t shard_begin() const { return shard_begin_; }    // this rank's first element

  // (padded_numel,): the buffer every parameter views.
  const Tensor& flat_parameters() const { return flat_parameters_; }
  // This rank's shard of a (padded_numel,) tensor: a (shard_numel,) view of it.
  Tensor shard_of_flat(const Tensor& flat) const;
  // Views of a (padded_numel,) tensor, one per parameter, shaped and laid out like it.
  std::vector<Tensor> unflatten(const Tensor& flat) const;
  // This rank's shard assembled from one tensor per parameter (each of its parameter's
  // shape; any layout, dtype or device): a new (shard_numel,) tensor in `category` on the
  // parameters' device and dtype, zero where the shard holds padding. Copies only the
  // elements that fall in the shard.
  Tensor shard_of(const std::vector<Tensor>& per_parameter, MemoryCategory category) const;

  // The index of the first parameter without a gradient, or -1.
  int64_t first_without_gradient() const;
  // The index of the first parameter that no longer views its part of the flat buffer
  // (moved since by Module::to or set_data), or -1.
  int64_t first_moved() const;
  // The gradients as one (padded_numel,) GRADIENT buffer that every parameter's .grad
  // views: gradients that already view it are left alone, others are copied in and
  // replaced by their view (so the next backward accumulates into the buffer in place).
  // The buffer lives as long as some gradient views it: zero_grad(set_to_none) frees it.
  // Every parameter must have a gradient.
  Tensor flat_gradients();

 private:
  // Parameter i's part of `flat`, in its layout.
  Tensor view_of(const Tensor& flat, size_t i) const;

  std::vector<Tensor> params_;
  std::vector<int64_t> offsets_;         // each parameter's first element in the buffer
  std::vector<MemoryFormat> formats_;    // each parameter's layout, kept in the buffer
  int64_t numel_ = 0;
  int64_t padded_numel_ = 0;
  int64_t shard_numel_ = 0;
  int64_t shard_begin_ = 0;
  Tensor flat_parameters_;
  // The flat gradient buffer, while some gradient views it.
  std::weak_ptr<Storage> gradient_storage_;
};

}  // namespace mg::distributed
