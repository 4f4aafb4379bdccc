// core/cpu/embedding.cpp — CPU embedding lookup and its weight gradient.
//
// The forward copies one table row per index (the caller has checked every index). The
// backward groups the positions by the row they read (a stable counting sort, so each
// row's positions stay in order of n), then sums each row's gradients in the compute type
// (float for 16-bit tables) and writes the row once: deterministic, exact in order of n,
// and parallel over rows without atomics or a float32 copy of the whole table.
#include <algorithm>
#include <vector>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"

namespace mg::cpu {

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& output) {
  const int64_t count = indices.numel(), row_size = weight.sizes()[1];
  const int64_t* rows = indices.data_ptr<int64_t>();
  dispatch_floating(weight.dtype(), "embedding", [&]<class T>() {
    const T* table = weight.data_ptr<T>();
    T* out = output.data_ptr<T>();
#pragma omp parallel for schedule(static) if (count * row_size >= kParallelGrain)
    for (int64_t n = 0; n < count; ++n) {
      const T* row = table + rows[n] * row_size;
      std::copy(row, row + row_size, out + n * row_size);
    }
  });
}

void embedding_backward(const Tensor& grad_output, const Tensor& indices, int64_t padding_idx,
                        const Tensor& grad_weight) {
  const int64_t count = indices.numel(), table_rows = grad_weight.sizes()[0], row_size = grad_weight.sizes()[1];
  const int64_t* rows = indices.data_ptr<int64_t>();
  // positions[first[v] .. first[v + 1]) are the n with indices[n] == v, in order of n.
  std::vector<int64_t> first(table_rows + 1, 0);
  for (int64_t n = 0; n < count; ++n) {
    if (rows[n] != padding_idx) ++first[rows[n] + 1];
  }
  for (int64_t v = 0; v < table_rows; ++v) first[v + 1] += first[v];
  std::vector<int64_t> positions(first[table_rows]);
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t n = 0; n < count; ++n) {
    if (rows[n] != padding_idx) positions[next[rows[n]]++] = n;
  }

  dispatch_floating(grad_weight.dtype(), "embedding backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* grad = grad_output.data_ptr<T>();
    T* result = grad_weight.data_ptr<T>();
#pragma omp parallel if (count * row_size >= kParallelGrain)
    {
      std::vector<C> total(row_size);
#pragma omp for schedule(dynamic, 64)
      for (int64_t v = 0; v < table_rows; ++v) {
        if (first[v] == first[v + 1]) continue;  // never looked up: its zeros stay
        T* destination = result + v * row_size;
        for (int64_t d = 0; d < row_size; ++d) total[d] = static_cast<C>(destination[d]);
        for (int64_t p = first[v]; p < first[v + 1]; ++p) {
          const T* source = grad + positions[p] * row_size;
          for (int64_t d = 0; d < row_size; ++d) total[d] += static_cast<C>(source[d]);
        }
        for (int64_t d = 0; d < row_size; ++d) destination[d] = static_cast<T>(total[d]);
      }
    }
  });
}

}  // namespace mg::cpu
