// nn/kv_cache.cpp — the per-layer key and value buffers of incremental decoding.
#include "memgrad/nn/kv_cache.h"

#include <algorithm>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::nn {

KVCache::KVCache(const GPTOptions& options, int64_t batch)
    : batch_(batch), n_head_(options.n_head), head_dim_(options.n_head > 0 ? options.n_embd / options.n_head : 0),
      block_size_(options.block_size), layers_(static_cast<size_t>(std::max<int64_t>(options.n_layer, 0))) {
  MG_CHECK(batch > 0 && options.n_layer > 0 && options.n_head > 0 && options.block_size > 0 &&
               options.n_embd % options.n_head == 0,
           "KVCache: batch=", batch, ", n_layer=", options.n_layer, ", n_head=", options.n_head, ", n_embd=",
           options.n_embd, ", block_size=", options.block_size,
           " must be positive with n_embd a multiple of n_head. Hint: pass the model's own options(), "
           "KVCache(model.options(), batch)");
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (const Layer& layer : layers_) {
    if (layer.keys.defined()) total += static_cast<int64_t>(layer.keys.nbytes() + layer.values.nbytes());
  }
  return total;
}

std::pair<Tensor, Tensor> KVCache::append(int64_t layer, const Tensor& keys, const Tensor& values) {
  MG_CHECK(!GradMode::is_enabled(), "KVCache: used with gradients enabled; the cache writes its buffers in place ",
           "and is for inference only. Hint: run the forward under mg::NoGradGuard");
  MG_CHECK(layer >= 0 && layer < n_layer(), "KVCache: layer ", layer, " is out of range for a cache of ", n_layer(),
           " layers. Hint: build the cache from the model's own options()");
  const int64_t tokens = keys.defined() && keys.dim() == 4 ? keys.size(2) : 0;
  const Shape expected{batch_, n_head_, tokens, head_dim_};
  MG_CHECK(keys.defined() && values.defined() && keys.sizes() == expected && values.sizes() == expected,
           "KVCache: expected keys and values of shape (B=", batch_, ", H=", n_head_, ", T_new, D=", head_dim_,
           "), got keys ", keys.defined() ? keys.sizes() : Shape{}, " and values ",
           values.defined() ? values.sizes() : Shape{}, ". Hint: the batch of every forward must be the cache's");
  MG_CHECK(length_ + tokens <= block_size_, "KVCache: ", length_, " cached tokens and ", tokens,
           " new ones exceed block_size=", block_size_, ", the longest the position table covers. Hint: clear() ",
           "the cache and run the last (at most ", block_size_, ") tokens again");
  Layer& buffers = layers_[static_cast<size_t>(layer)];
  if (!buffers.keys.defined()) {
    const TensorOptions options{.dtype = keys.dtype(), .device = keys.device(), .category = MemoryCategory::Activation};
    buffers.keys = empty({batch_, n_head_, block_size_, head_dim_}, options);
    buffers.values = empty({batch_, n_head_, block_size_, head_dim_}, options);
  }
  MG_CHECK(keys.dtype() == buffers.keys.dtype() && keys.device() == buffers.keys.device(), "KVCache: layer ", layer,
           " holds ", buffers.keys.dtype(), " keys on ", buffers.keys.device(), ", the new ones are ", keys.dtype(),
           " on ", keys.device(), ". Hint: run every forward of one cache under the same autocast and device, or "
           "use a new cache");
  buffers.keys.narrow(2, length_, tokens).copy_(keys);
  buffers.values.narrow(2, length_, tokens).copy_(values);
  return {buffers.keys.narrow(2, 0, length_ + tokens), buffers.values.narrow(2, 0, length_ + tokens)};
}

void KVCache::advance(int64_t tokens) {
  MG_ASSERT(tokens >= 0 && length_ + tokens <= block_size_, "append() checked the room");
  length_ += tokens;
}

}  // namespace mg::nn
