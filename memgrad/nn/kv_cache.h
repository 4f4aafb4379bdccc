// nn/kv_cache.h — KVCache: the keys and values a GPT's attention layers computed for the
// tokens it has already read, so that sampling the next token runs the model over the new
// token only instead of over the whole window again (GPT::forward(tokens, cache)).
//
//   step t: q, k, v = c_attn(x_new)            (B, H, T_new, D) each
//           keys    = [cached keys | k]        (B, H, length + T_new, D), a view of the buffer
//           values  = [cached values | v]
//           y       = softmax(q keys^T / sqrt(D) + causal mask) values
//
// Query i of the new tokens sits at position length + i and attends to keys 0 ..
// length + i: every cached key and the new ones up to itself.
//
// Memory: per layer one key and one value buffer of (B, H, block_size, D), allocated whole
// on the first forward (in the dtype and on the device of that forward's keys: under
// autocast its 16-bit dtype), so appending never reallocates or copies:
//
//   bytes() = 2 * n_layer * B * block_size * n_embd * element size
//
// (the small preset, batch 1, float32: 2 * 6 * 256 * 384 * 4 = 4.5 MiB). The buffers are
// tagged ACTIVATION: they are what the forward keeps per token, as the activations saved
// for backward are in training, and they grow (in use, not in bytes) with the sequence.
//
// NOTE: only without autograd (under NoGradGuard): the buffers are written in place, which
// would break a graph that saved them, and nothing here needs gradients. A full cache
// (length() == capacity()) takes no more tokens: GPT-2's positions are learned absolute
// ones, so sliding the window would change every cached key; the caller starts again from
// a shorter context (clear(), then one forward over it), as examples/gpt/sampling.cpp does.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/nn/gpt_options.h"

namespace mg::nn {

class KVCache {
 public:
  // Room for `batch` sequences of up to options.block_size tokens in each of options.n_layer
  // layers; allocates nothing until the first forward.
  KVCache(const GPTOptions& options, int64_t batch);

  int64_t length() const { return length_; }        // tokens cached, the same in every layer
  int64_t capacity() const { return block_size_; }  // block_size
  int64_t batch() const { return batch_; }
  int64_t n_layer() const { return static_cast<int64_t>(layers_.size()); }
  // Bytes of the buffers: 0 before the first forward, then the formula above.
  int64_t bytes() const;

  // Forgets the cached tokens (keeps the buffers): the next forward starts at position 0.
  void clear() { length_ = 0; }

  // Writes `keys` and `values` (B, H, T_new, D) of layer `layer` after its cached ones and
  // returns that layer's keys and values of all length() + T_new tokens, (B, H, length() +
  // T_new, D) views of its buffers. length() moves on only with advance(), once every
  // layer has appended.
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& keys, const Tensor& values);
  void advance(int64_t tokens);

 private:
  struct Layer {
    Tensor keys;    // (B, H, block_size, D)
    Tensor values;  // (B, H, block_size, D)
  };
  int64_t batch_;
  int64_t n_head_;
  int64_t head_dim_;
  int64_t block_size_;
  int64_t length_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace mg::nn
