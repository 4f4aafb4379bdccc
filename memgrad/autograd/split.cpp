// autograd/split.cpp — split.h's split and chunk, views of consecutive pieces of a tensor
// along one dim, forward and backward side by side.
//
// NOTE: all pieces are outputs of ONE node (Node supports several outputs: each piece's
// AutogradMeta names its output_nr). Its backward receives every piece's gradient at
// once and writes them into a single tensor of the input's sizes, zero-filling only the
// pieces that got none: one allocation, where a node per piece (as narrow gives) would
// allocate a zero-padded input-sized gradient per piece and then sum them. Splitting a
// fused QKV projection into q, k and v is the common case.
//
// NOTE: when the pieces' gradients already sit in one storage exactly where the pieces sit
// in a contiguous input (the fused attention's backward writes q, k and v's gradients so),
// the backward returns that region as the input's gradient: no allocation, no copy.
#include "memgrad/autograd/split.h"

#include <algorithm>

#include "memgrad/autograd/function.h"
#include "memgrad/autograd/op_support.h"
#include "memgrad/autograd/shape.h"

namespace mg {

namespace {

using autograd::Node;

class SplitBackward final : public Node {
 public:
  SplitBackward(Shape input_sizes, int dim, std::vector<int64_t> lengths)
      : Node("SplitBackward", static_cast<uint32_t>(lengths.size())),
        input_sizes_(input_sizes), dim_(dim), lengths_(std::move(lengths)) {}

  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    auto first_grad = std::find_if(grad_outputs.begin(), grad_outputs.end(),
                                   [](const Tensor& grad) { return grad.defined(); });
    if (first_grad == grad_outputs.end()) return {Tensor()};
    if (Tensor in_place = gradient_in_place(grad_outputs); in_place.defined()) return {in_place};
    Tensor grad_input = empty(input_sizes_, {.dtype = first_grad->dtype(), .device = first_grad->device()});
    const KernelTable& device_kernels = kernels(grad_input.device());
    int64_t start = 0;
    for (size_t i = 0; i < lengths_.size(); ++i) {
      Tensor piece = narrow(grad_input, dim_, start, lengths_[i]);
      if (grad_outputs[i].defined()) {
        device_kernels.copy(grad_outputs[i], piece);
      } else {
        device_kernels.fill(piece, 0.0);
      }
      start += lengths_[i];
    }
    return {grad_input};
  }

 private:
  // The input-shaped gradient when every piece's gradient is defined and they share one
  // storage, each with the strides of a contiguous input (where its size exceeds 1) at its
  // piece's offset in it, measured from the first piece's; else an undefined tensor.
  Tensor gradient_in_place(const std::vector<Tensor>& grad_outputs) const {
    if (input_sizes_.numel() == 0) return {};
    const Shape strides = contiguous_strides(input_sizes_);
    const Tensor& first = grad_outputs[0];
    int64_t start = 0;
    for (size_t i = 0; i < lengths_.size(); ++i) {
      const Tensor& grad = grad_outputs[i];
      if (!grad.defined() || grad.storage() != first.storage() || grad.dtype() != first.dtype() ||
          grad.storage_offset() != first.storage_offset() + start * strides[dim_]) {
        return {};
      }
      for (int d = 0; d < grad.dim(); ++d) {
        if (grad.sizes()[d] > 1 && grad.strides()[d] != strides[d]) return {};
      }
      start += lengths_[i];
    }
    return make_view(first, input_sizes_, strides, first.storage_offset());
  }

  Shape input_sizes_;
  int dim_;
  std::vector<int64_t> lengths_;
};

}  // namespace

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  autograd::check_defined("split", x);
  MG_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor. Hint: reshape it to (1) first.");
  MG_CHECK(!split_sizes.empty(), "split: expected at least one piece size (tensor of shape ", x.sizes(), ")");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  int64_t total = 0;
  for (int64_t length : split_sizes) {
    MG_CHECK(length >= 0, "split: piece sizes must be non-negative, got ", length, " (tensor of shape ",
             x.sizes(), ", dimension ", d, ")");
    total += length;
  }
  MG_CHECK(total == size, "split: the piece sizes sum to ", total, " but dimension ", d, " of the tensor of shape ",
           x.sizes(), " has size ", size, ". Hint: the sizes must add up to the dimension exactly.");

  std::vector<Tensor> pieces;
  pieces.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t length : split_sizes) {
    Shape sizes = x.sizes();
    sizes[d] = length;
    pieces.push_back(make_view(x, sizes, x.strides(), x.storage_offset() + start * x.strides()[d]));
    start += length;
  }
  if (autograd::needs_grad(x)) {
    auto node = std::make_shared<SplitBackward>(x.sizes(), d, split_sizes);
    // connect() makes the first piece output 0 and sets the node's edge; the others follow.
    autograd::connect(node, pieces[0], {x});
    for (size_t i = 1; i < pieces.size(); ++i) {
      AutogradMeta& meta = pieces[i].ensure_autograd_meta();
      meta.grad_fn = node;
      meta.output_nr = static_cast<uint32_t>(i);
    }
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  autograd::check_defined("split", x);
  MG_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor. Hint: reshape it to (1) first.");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  MG_CHECK(split_size > 0 || (split_size == 0 && size == 0), "split: split_size must be positive, got ",
           split_size, " (tensor of shape ", x.sizes(), ", dimension ", d, ")");
  // As torch.split: full pieces, then the remainder; an empty dim gives one empty piece.
  std::vector<int64_t> lengths;
  for (int64_t start = 0; start < size; start += split_size) lengths.push_back(std::min(split_size, size - start));
  if (lengths.empty()) lengths.push_back(0);
  return split(x, lengths, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  autograd::check_defined("chunk", x);
  MG_CHECK(chunks > 0, "chunk: the number of chunks must be positive, got ", chunks, " (tensor of shape ",
           x.sizes(), ")");
  MG_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor. Hint: reshape it to (1) first.");
  int d = wrap_dim(dim, x.dim());
  int64_t size = x.sizes()[d];
  // As torch.chunk: pieces of ceil(size / chunks), so there may be fewer than `chunks`;
  // an empty dim gives `chunks` empty pieces.
  if (size == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  return split(x, (size + chunks - 1) / chunks, d);
}

}  // namespace mg
