// core/cpu/multinomial.cpp — core/cpu room: multinomial sampling of each row of a (rows, n)
// weight matrix, with or without replacement, drawing what the CUDA kernel draws (the
// shared arithmetic is in core/multinomial_draw.h). Rows are spread over OpenMP threads.
#include <algorithm>
#include <numeric>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/multinomial_draw.h"

namespace mg::cpu {

namespace {

// Draw s of a row whose inclusive cumulative weights are `cumulative`: the first category
// whose cumulative weight exceeds u * total. A zero-weight category never is (its
// cumulative weight equals its predecessor's).
int64_t draw_with_replacement(const std::vector<double>& cumulative, double u) {
  double target = u * cumulative.back();
  auto found = std::upper_bound(cumulative.begin(), cumulative.end(), target);
  // NOTE: u * total may round up to total; the draw then falls in the last positive weight.
  if (found == cumulative.end()) found = std::lower_bound(cumulative.begin(), cumulative.end(), cumulative.back());
  return found - cumulative.begin();
}

}  // namespace

void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, PhiloxState rng,
                 const Tensor& output) {
  MG_ASSERT(probs.is_contiguous() && output.is_contiguous(), "multinomial expects contiguous tensors");
  const int64_t n = probs.sizes()[probs.dim() - 1];
  const int64_t rows = probs.numel() / n;
  int64_t* samples = output.data_ptr<int64_t>();
  dispatch_floating(probs.dtype(), "multinomial", [&]<class T>() {
    const T* weights = probs.data_ptr<T>();
#pragma omp parallel if (rows * std::max(n, num_samples) >= kParallelGrain)
    {
      std::vector<double> row_values(static_cast<size_t>(n));  // cumulative weights, or keys
      std::vector<int64_t> positions(replacement ? 0 : static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const T* row_weights = weights + row * n;
        int64_t* row_samples = samples + row * num_samples;
        if (replacement) {
          double running = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            running += static_cast<double>(row_weights[j]);
            row_values[j] = running;
          }
          for (int64_t s = 0; s < num_samples; ++s) {
            double u = multinomial_uniform(rng, static_cast<uint64_t>(row * num_samples + s));
            row_samples[s] = draw_with_replacement(row_values, u);
          }
          continue;
        }
        for (int64_t j = 0; j < n; ++j) {
          row_values[j] = multinomial_key(rng, static_cast<uint64_t>(row * n + j), static_cast<double>(row_weights[j]));
        }
        // The largest keys first; equal keys (zero weights) by lower index.
        std::iota(positions.begin(), positions.end(), int64_t{0});
        std::partial_sort(positions.begin(), positions.begin() + num_samples, positions.end(),
                          [&](int64_t a, int64_t b) {
                            return row_values[a] != row_values[b] ? row_values[a] > row_values[b] : a < b;
                          });
        std::copy_n(positions.begin(), num_samples, row_samples);
      }
    }
  });
}

}  // namespace mg::cpu
