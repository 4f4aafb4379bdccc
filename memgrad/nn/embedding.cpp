// nn/embedding.cpp — the embedding table: its parameter, and a call to mg::embedding.
#include "memgrad/nn/embedding.h"

#include "memgrad/autograd/embedding.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/factory.h"
#include "memgrad/nn/init.h"

namespace mg::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     Generator* generator)
    : Module("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  MG_CHECK(num_embeddings > 0 && embedding_dim >= 0, "Embedding(", num_embeddings, ", ", embedding_dim,
           "): num_embeddings (the number of rows, e.g. the vocabulary size) must be positive and ",
           "embedding_dim must be non-negative");
  if (padding_idx) {
    MG_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, "Embedding(", num_embeddings,
             ", ", embedding_dim, ", padding_idx=", *padding_idx, "): padding_idx must be within [",
             -num_embeddings, ", ", num_embeddings, ") (a negative index counts from the end)");
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(weight, 0.0, 1.0, generator);
  if (padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx_).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight, indices, padding_idx_ ? *padding_idx_ : -1);
}

std::string Embedding::extra_repr() const {
  std::string text = detail::str_cat(num_embeddings_, ", ", embedding_dim_);
  if (padding_idx_) text += detail::str_cat(", padding_idx=", *padding_idx_);
  return text;
}

}  // namespace mg::nn
