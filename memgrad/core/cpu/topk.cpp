// core/cpu/topk.cpp — core/cpu room: the k largest (or smallest) entries of each row of a
// contiguous (rows, n) tensor, sorted, with their int64 indices. A partial sort of the
// row's positions per row (O(n log k)), rows spread over OpenMP threads.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

namespace {

template <class C>
bool is_nan(C value) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(value);
  } else {
    return false;
  }
}

// The order topk lists entries in (kernels.h): larger first when `largest`, else smaller
// first; NaN counts as larger than any number; equal values by lower index first.
template <class C>
bool comes_first(C a, int64_t index_a, C b, int64_t index_b, bool largest) {
  bool a_nan = is_nan(a), b_nan = is_nan(b);
  if (a_nan != b_nan) return largest ? a_nan : b_nan;
  if (!a_nan && a != b) return largest ? a > b : a < b;
  return index_a < index_b;
}

}  // namespace

void topk(const Tensor& input, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  MG_ASSERT(input.is_contiguous() && values.is_contiguous() && indices.is_contiguous(),
            "topk expects contiguous tensors");
  const int64_t n = input.dim() == 0 ? 1 : input.sizes()[input.dim() - 1];
  const int64_t rows = n == 0 ? 0 : input.numel() / n;
  dispatch_dtype(input.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* in = input.data_ptr<T>();
    T* top_values = values.data_ptr<T>();
    int64_t* top_indices = indices.data_ptr<int64_t>();
    // NOTE: a copy local to this lambda: clang 14 rejects a lambda in the parallel region
    // that names the enclosing function's parameter ("reference to local variable").
    const bool larger_first = largest;
#pragma omp parallel if (rows * n >= kParallelGrain)
    {
      std::vector<int64_t> positions(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const T* row_values = in + row * n;
        std::iota(positions.begin(), positions.end(), int64_t{0});
        std::partial_sort(positions.begin(), positions.begin() + k, positions.end(), [&](int64_t a, int64_t b) {
          return comes_first(static_cast<C>(row_values[a]), a, static_cast<C>(row_values[b]), b, larger_first);
        });
        for (int64_t j = 0; j < k; ++j) {
          top_values[row * k + j] = row_values[positions[j]];
          top_indices[row * k + j] = positions[j];
        }
      }
    }
  });
}

}  // namespace mg::cpu
