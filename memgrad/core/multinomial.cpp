// core/multinomial.cpp — core room: mg::multinomial (core/factory.h), sampling category
// indices from rows of weights as torch.multinomial does: the argument checks, the
// Philox blocks reserved from the generator, and the call into the device kernel.
#include <cmath>

#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"

namespace mg {

namespace {

// On the CPU the weights can be read without a device sync: every row must be a
// distribution (non-negative, finite, not all zero). CUDA leaves this to the kernel's
// contract, as reading the values back would stall the stream.
void check_weights(const Tensor& rows) {
  if (rows.device() != Device::cpu()) return;
  const int64_t n = rows.sizes()[1];
  Tensor as_double = converted_copy(rows, DType::Float64, Device::cpu());
  const double* weights = as_double.data_ptr<double>();
  for (int64_t row = 0; row < rows.sizes()[0]; ++row) {
    double total = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      double weight = weights[row * n + j];
      MG_CHECK(std::isfinite(weight) && weight >= 0.0, "multinomial: the weights must be non-negative and finite, "
               "but row ", row, " has ", weight, " at category ", j, " (probs of shape ", rows.sizes(),
               "). Hint: clamp the probabilities, or check the logits for inf/NaN before the softmax.");
      total += weight;
    }
    MG_CHECK(total > 0.0, "multinomial: the weights of row ", row, " sum to 0 (probs of shape ", rows.sizes(),
             "): there is nothing to draw from. Hint: every row needs at least one positive weight.");
  }
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* generator) {
  MG_CHECK(probs.defined(), "multinomial: got an undefined tensor");
  MG_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: probs must be 1-D (n) or 2-D (rows, n), got shape ",
           probs.sizes());
  MG_CHECK(is_floating(probs.dtype()), "multinomial: probs must be floating, got ", probs.dtype(),
           ". Hint: convert with .to(mg::DType::Float32).");
  const int64_t n = probs.sizes()[probs.dim() - 1];
  MG_CHECK(n > 0, "multinomial: probs of shape ", probs.sizes(), " has no categories to draw from");
  MG_CHECK(num_samples > 0, "multinomial: num_samples must be positive, got ", num_samples);
  MG_CHECK(replacement || num_samples <= n, "multinomial: cannot draw ", num_samples, " samples from ", n,
           " categories without replacement (probs of shape ", probs.sizes(),
           "). Hint: pass replacement = true, or draw at most ", n, ".");
  const int64_t row_count = probs.dim() == 1 ? 1 : probs.sizes()[0];
  Tensor dense = probs.is_contiguous() ? probs : contiguous_copy(probs);
  Tensor rows = make_view(dense, {row_count, n}, {n, 1}, dense.storage_offset());  // (rows, n)
  check_weights(rows);
  Generator& source = generator ? *generator : default_generator();
  PhiloxState rng = source.reserve(row_count * (replacement ? num_samples : n), probs.device());
  Tensor output = empty({row_count, num_samples}, {.dtype = DType::Int64, .device = probs.device()});
  kernels(probs.device()).multinomial(rows, num_samples, replacement, rng, output);
  return probs.dim() == 1 ? make_view(output, {num_samples}, {1}, 0) : output;
}

}  // namespace mg
