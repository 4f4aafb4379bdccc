// autograd/embedding.cpp — embedding: rows of a table looked up by index, forward and
// backward.
//
// The node (EmbeddingBackward) saves only the indices, in the dtype the caller gave them
// (int32 indices cost half of int64), and remembers the table's sizes: the weight's
// gradient is a scatter-add of the incoming gradient's rows, which needs nothing else.
//
// Out-of-range indices: on the CPU every index is checked before the kernel, and the error
// names the value, its position and the table's rows. On CUDA that check would need the
// indices on the host (a synchronisation per lookup), so the kernel checks them itself,
// writes zeros for a bad row, and cuda/device_error.h raises the error at the next
// synchronisation.
#include "memgrad/autograd/embedding.h"

#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"

namespace mg {

namespace {

// indices as the kernels take them: contiguous int64, flattened to (N).
Tensor flat_int64(const Tensor& indices) {
  Tensor as_int64 = indices.dtype() == DType::Int64 ? indices : converted_copy(indices, DType::Int64, indices.device());
  if (!as_int64.is_contiguous()) as_int64 = contiguous_copy(as_int64);
  return make_view(as_int64, {as_int64.numel()}, {1}, as_int64.storage_offset());
}

// Where flat position n sits in a tensor of `sizes`, as [i, j, ...].
Shape position_of(int64_t n, const Shape& sizes) {
  Shape position = Shape::filled(sizes.size(), 0);
  for (int d = sizes.size() - 1; d >= 0; --d) {
    position[d] = n % sizes[d];
    n /= sizes[d];
  }
  return position;
}

void check_indices_on_host(const Tensor& flat_indices, const Shape& indices_sizes, const Tensor& weight) {
  const int64_t table_rows = weight.sizes()[0];
  const int64_t* values = flat_indices.data_ptr<int64_t>();
  for (int64_t n = 0; n < flat_indices.numel(); ++n) {
    MG_CHECK(values[n] >= 0 && values[n] < table_rows, "embedding: index ", values[n], " at position ",
             position_of(n, indices_sizes), " of indices of shape ", indices_sizes,
             " is out of range for an embedding of ", table_rows, " rows (weight shape ", weight.sizes(),
             "). Hint: every index must lie in [0, ", table_rows,
             "): check that the tokenizer's vocabulary fits the embedding, and look for negative or "
             "uninitialised ids in the batch.");
  }
}

void check_arguments(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  autograd::check_defined("embedding", weight);
  autograd::check_defined("embedding", indices);
  MG_CHECK(weight.dim() == 2, "embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape ",
           weight.sizes(), ". Hint: one row per index.");
  autograd::check_floating("embedding", weight);
  MG_CHECK(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32,
           "embedding: expected int64 or int32 indices, got ", indices.dtype(), " of shape ", indices.sizes(),
           ". Hint: convert with .to(mg::DType::Int64).");
  MG_CHECK(indices.device() == weight.device(), "embedding: expected the indices on the weight's device ",
           weight.device(), ", got ", indices.device(), " (indices of shape ", indices.sizes(),
           "). Hint: move them with .to(", weight.device(), ").");
  const int64_t table_rows = weight.sizes()[0];
  MG_CHECK(padding_idx == -1 || (padding_idx >= 0 && padding_idx < table_rows), "embedding: padding_idx ",
           padding_idx, " is out of range for an embedding of ", table_rows,
           " rows: expected -1 (no padding row) or a row in [0, ", table_rows,
           "). Hint: PyTorch's negative padding_idx counts from the end; pass num_embeddings + padding_idx (",
           table_rows + padding_idx, " here) instead.");
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_arguments(weight, indices, padding_idx);
  const int64_t table_rows = weight.sizes()[0], row_size = weight.sizes()[1];
  Tensor flat_indices = flat_int64(indices);
  if (weight.device().is_cpu()) check_indices_on_host(flat_indices, indices.sizes(), weight);

  Tensor table = weight.is_contiguous() ? weight : contiguous_copy(weight);
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(row_size);
  Tensor out = autograd::new_output(out_sizes, weight.dtype(), weight);
  Tensor out_rows = make_view(out, {flat_indices.numel(), row_size}, {row_size, 1}, 0);  // (N, D)
  if (out.numel() > 0) kernels(weight.device()).embedding(table, flat_indices, out_rows);

  if (autograd::needs_grad(weight)) {
    Tensor saved_indices = indices.is_contiguous() ? indices : contiguous_copy(indices);
    autograd::record(
        "EmbeddingBackward", out, {weight}, autograd::saved(saved_indices),
        [table_rows, row_size, padding_idx](const autograd::Node&, const Tensor& grad, const Tensor& looked_up) {
          Tensor grad_rows = grad.is_contiguous() ? grad : contiguous_copy(grad);
          const int64_t count = looked_up.numel();
          grad_rows = make_view(grad_rows, {count, row_size}, {row_size, 1}, grad_rows.storage_offset());  // (N, D)
          // Rows never looked up get no gradient: zeros, into which the kernel adds.
          Tensor grad_weight = zeros({table_rows, row_size}, {.dtype = grad.dtype(), .device = grad.device()});
          if (count > 0 && row_size > 0) {
            kernels(grad.device()).embedding_backward(grad_rows, flat_int64(looked_up), padding_idx, grad_weight);
          }
          return std::vector<Tensor>{grad_weight};
        });
  }
  return out;
}

}  // namespace mg
