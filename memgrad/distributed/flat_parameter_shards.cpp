// distributed/flat_parameter_shards.cpp — the flat layout of one parameter group, its
// shards, and the gradients as views of one flat buffer.
#include "memgrad/distributed/flat_parameter_shards.h"

#include <algorithm>
#include <utility>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::distributed {
namespace {

// `tensor`'s elements in memory order as a 1-d view: `tensor` must be dense (in some
// layout), so its elements fill one span of its storage from its offset on.
Tensor memory_order_view(const Tensor& tensor) {
  return make_view(tensor, {tensor.numel()}, {1}, tensor.storage_offset());
}

}  // namespace

FlatParameterShards::FlatParameterShards(std::vector<Tensor> params, int rank, int world_size)
    : params_(std::move(params)) {
  MG_ASSERT(!params_.empty() && world_size > 0 && rank >= 0 && rank < world_size, "rank ", rank,
            " of ", world_size, ", ", params_.size(), " parameters");
  for (const Tensor& param : params_) {
    offsets_.push_back(numel_);
    formats_.push_back(suggest_memory_format(param));
    numel_ += param.numel();
  }
  padded_numel_ = (numel_ + world_size - 1) / world_size * world_size;
  shard_numel_ = padded_numel_ / world_size;
  shard_begin_ = rank * shard_numel_;

  NoGradGuard no_grad;
  const Tensor& first = params_.front();
  // Zeros: the padding is stepped like any element, and zero gradients keep it at zero.
  flat_parameters_ = zeros({padded_numel_}, {.dtype = first.dtype(), .device = first.device(),
                                             .category = MemoryCategory::Parameter});
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor part = view_of(flat_parameters_, i);
    part.copy_(params_[i]);
    // Same TensorImpl, new bytes: the parameter's earlier storage is freed once no other
    // tensor views it.
    params_[i].set_data(part);
  }
}

Tensor FlatParameterShards::view_of(const Tensor& flat, size_t i) const {
  const Shape& sizes = params_[i].sizes();
  return make_view(flat, sizes, strides_for(sizes, formats_[i]), flat.storage_offset() + offsets_[i]);
}

Tensor FlatParameterShards::shard_of_flat(const Tensor& flat) const {
  MG_ASSERT(flat.numel() == padded_numel_ && flat.is_contiguous(), "flat tensor of ", flat.numel(),
            " elements for a layout of ", padded_numel_);
  return make_view(flat, {shard_numel_}, {1}, flat.storage_offset() + shard_begin_);
}

std::vector<Tensor> FlatParameterShards::unflatten(const Tensor& flat) const {
  MG_ASSERT(flat.numel() == padded_numel_ && flat.is_contiguous(), "flat tensor of ", flat.numel(),
            " elements for a layout of ", padded_numel_);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < params_.size(); ++i) parts.push_back(view_of(flat, i));
  return parts;
}

Tensor FlatParameterShards::shard_of(const std::vector<Tensor>& per_parameter, MemoryCategory category) const {
  MG_ASSERT(per_parameter.size() == params_.size(), per_parameter.size(), " tensors for ", params_.size(),
            " parameters");
  NoGradGuard no_grad;
  const Tensor& first = params_.front();
  Tensor shard = zeros({shard_numel_}, {.dtype = first.dtype(), .device = first.device(), .category = category});
  const int64_t shard_end = shard_begin_ + shard_numel_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t begin = std::max(offsets_[i], shard_begin_);
    const int64_t end = std::min(offsets_[i] + params_[i].numel(), shard_end);
    if (begin >= end) continue;  // parameter i lies outside this shard
    Tensor source = per_parameter[i];
    MG_ASSERT(source.sizes() == params_[i].sizes(), "tensor of shape ", source.sizes(), " for a parameter of ",
              params_[i].sizes());
    // In the parameter's layout, dtype and device, so that memory order is the buffer's.
    if (source.dtype() != first.dtype() || source.device() != first.device() ||
        !is_contiguous_in(source, formats_[i])) {
      source = converted_copy(source, first.dtype(), first.device(), /*non_blocking=*/false, formats_[i]);
    }
    shard.narrow(0, begin - shard_begin_, end - begin)
        .copy_(memory_order_view(source).narrow(0, begin - offsets_[i], end - begin));
  }
  return shard;
}

int64_t FlatParameterShards::first_without_gradient() const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t FlatParameterShards::first_moved() const {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& param = params_[i];
    const bool in_place = param.storage() == flat_parameters_.storage() && param.dtype() == flat_parameters_.dtype() &&
                          param.storage_offset() == flat_parameters_.storage_offset() + offsets_[i];
    if (!in_place) return static_cast<int64_t>(i);
  }
  return -1;
}

Tensor FlatParameterShards::flat_gradients() {
  NoGradGuard no_grad;
  const Tensor& first = params_.front();
  Tensor flat;
  if (std::shared_ptr<Storage> storage = gradient_storage_.lock()) {
    flat = Tensor(std::make_shared<TensorImpl>(std::move(storage), Shape{padded_numel_}, Shape{1}, 0, first.dtype()));
  } else {
    // Zeros: the padding's gradient, which nothing else writes.
    flat = zeros({padded_numel_}, {.dtype = first.dtype(), .device = first.device(),
                                   .category = MemoryCategory::Gradient});
    gradient_storage_ = flat.storage();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].grad();
    MG_ASSERT(grad.defined(), "parameter ", i, " has no gradient");
    const Tensor part = view_of(flat, i);
    const bool already_viewed = grad.storage() == part.storage() &&
                                grad.storage_offset() == part.storage_offset() && grad.strides() == part.strides();
    if (already_viewed) continue;
    part.copy_(grad);
    params_[i].set_grad(part);
  }
  return flat;
}

}  // namespace mg::distributed
