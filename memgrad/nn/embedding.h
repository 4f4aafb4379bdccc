// nn/embedding.h — Embedding: a learned table of vectors looked up by integer index,
// PyTorch's nn.Embedding (parameter "weight", initialisation and padding_idx as torch's).
//
// Memory: the table is num_embeddings * embedding_dim PARAMETER elements (GPT-2's token
// table: 50257 x 768 floats, 147 MiB); a lookup saves only its indices for backward.
#pragma once

#include <cstdint>
#include <optional>

#include "memgrad/core/random.h"
#include "memgrad/nn/module.h"

namespace mg::nn {

class Embedding : public Module {
 public:
  // weight starts normal(0, 1) from `generator` (default: the process-wide one), as
  // torch.nn.Embedding's. padding_idx (negative counts from num_embeddings, as in torch):
  // that row starts at zero and never gets a gradient, so it stays zero in training.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = {},
            Generator* generator = nullptr);

  // indices (any shape, int64 or int32) -> indices.sizes() + (embedding_dim). An index
  // outside [0, num_embeddings) is an error.
  Tensor forward(const Tensor& indices) override;
  // As PyTorch prints it: "50257, 768" or "10, 3, padding_idx=0".
  std::string extra_repr() const override;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  // In [0, num_embeddings) when set (a negative padding_idx given is wrapped).
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

  Tensor weight;  // (num_embeddings, embedding_dim)

 private:
  int64_t num_embeddings_;
  int64_t embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace mg::nn
