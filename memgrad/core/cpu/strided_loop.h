// core/cpu/strided_loop.h — the loop every CPU elementwise kernel runs on.
//
// Operands are views of any strides (a broadcast input has stride 0 where it repeats).
// Elementwise maps and fills first put the dims in memory order (core/memory_order.h), so
// operands that are all channels-last walk memory in order. Adjacent dimensions that are
// contiguous in every operand are then merged, so a dense tensor (contiguous or
// channels-last) becomes one flat run that the compiler vectorises; the runs are spread
// over OpenMP threads when there is enough work.
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>

#include "memgrad/core/memory_order.h"
#include "memgrad/core/tensor.h"

namespace mg::cpu {

// Work below this many elements stays on one thread: spawning costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

template <int N>
struct Operands {
  std::array<char*, N> data{};
  std::array<Shape, N> byte_strides{};
};

// Strides of `tensor` in bytes, aligned to a result of `sizes` (trailing dims match;
// dimensions where the tensor has size 1 or is missing repeat with stride 0).
inline Shape broadcast_byte_strides(const Tensor& tensor, const Shape& sizes) {
  Shape strides = Shape::filled(sizes.size(), 0);
  int offset = sizes.size() - tensor.dim();
  auto element_bytes = static_cast<int64_t>(tensor.element_size());
  for (int i = 0; i < tensor.dim(); ++i) {
    if (tensor.sizes()[i] != 1) strides[offset + i] = tensor.strides()[i] * element_bytes;
  }
  return strides;
}

// Rearranges the dims of `sizes` and of every operand's strides into memory order, the
// layout of operand `leading` (the output) deciding first. Only for loops whose result
// does not depend on the order the elements are visited in.
template <int N>
void to_memory_order(Shape& sizes, Operands<N>& operands, int leading) {
  std::array<Shape, N> deciding = operands.byte_strides;
  std::swap(deciding[0], deciding[leading]);
  Shape order = memory_order(sizes, deciding);
  sizes = permuted(sizes, order);
  for (Shape& strides : operands.byte_strides) strides = permuted(strides, order);
}

// Calls run(pointers, byte_strides, count) for every innermost run of `sizes`.
// `parallel` must be false when two runs may write the same output element (reductions).
template <int N, class Run>
void for_each_run(const Shape& sizes, Operands<N> operands, bool parallel, Run&& run) {
  // Drop size-1 dims and merge dims that are contiguous in every operand.
  Shape merged_sizes;
  std::array<Shape, N> merged_strides;
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return;
    if (sizes[d] == 1) continue;
    bool mergeable = !merged_sizes.empty();
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = merged_strides[k].back() == operands.byte_strides[k][d] * sizes[d];
    }
    if (mergeable) {
      merged_sizes[merged_sizes.size() - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) merged_strides[k][merged_sizes.size() - 1] = operands.byte_strides[k][d];
    } else {
      merged_sizes.push_back(sizes[d]);
      for (int k = 0; k < N; ++k) merged_strides[k].push_back(operands.byte_strides[k][d]);
    }
  }
  std::array<int64_t, N> inner_strides{};
  if (merged_sizes.empty()) {
    run(operands.data, inner_strides, int64_t{1});
    return;
  }
  int outer_dims = merged_sizes.size() - 1;
  int64_t inner_count = merged_sizes.back();
  for (int k = 0; k < N; ++k) inner_strides[k] = merged_strides[k].back();
  int64_t outer_count = 1;
  for (int d = 0; d < outer_dims; ++d) outer_count *= merged_sizes[d];

  int threads = parallel && outer_count * inner_count >= kParallelGrain ? omp_get_max_threads() : 1;
  // With few outer runs, split each run into chunks so every thread gets work.
  int64_t chunks = outer_count >= threads ? 1 : (threads + outer_count - 1) / outer_count;
  int64_t chunk_count = (inner_count + chunks - 1) / chunks;
  int64_t tasks = outer_count * chunks;

  auto run_task = [&](int64_t task) {
    int64_t outer = task / chunks;
    int64_t chunk = task % chunks;
    std::array<char*, N> pointers = operands.data;
    for (int d = outer_dims - 1; d >= 0; --d) {
      int64_t index = outer % merged_sizes[d];
      outer /= merged_sizes[d];
      for (int k = 0; k < N; ++k) pointers[k] += index * merged_strides[k][d];
    }
    int64_t begin = chunk * chunk_count;
    int64_t count = std::min(chunk_count, inner_count - begin);
    if (count <= 0) return;
    for (int k = 0; k < N; ++k) pointers[k] += begin * inner_strides[k];
    run(pointers, inner_strides, count);
  };

  if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t task = 0; task < tasks; ++task) run_task(task);
  } else {
    for (int64_t task = 0; task < tasks; ++task) run_task(task);
  }
}

// out[i] = fn(in[i]) over same-sized (or broadcast) views.
template <class In, class Out, class Fn>
void map1(const Tensor& input, const Tensor& output, Fn fn) {
  Operands<2> operands;
  operands.data = {static_cast<char*>(input.raw_data()), static_cast<char*>(output.raw_data())};
  operands.byte_strides = {broadcast_byte_strides(input, output.sizes()),
                           broadcast_byte_strides(output, output.sizes())};
  Shape sizes = output.sizes();
  to_memory_order(sizes, operands, /*leading=*/1);
  for_each_run<2>(sizes, operands, true,
                  [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                    if (s[0] == sizeof(In) && s[1] == sizeof(Out)) {
                      const In* in = reinterpret_cast<const In*>(p[0]);
                      Out* out = reinterpret_cast<Out*>(p[1]);
                      for (int64_t i = 0; i < n; ++i) out[i] = fn(in[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) {
                        *reinterpret_cast<Out*>(p[1] + i * s[1]) =
                            fn(*reinterpret_cast<const In*>(p[0] + i * s[0]));
                      }
                    }
                  });
}

// out[i] = fn(a[i], b[i]) with a and b broadcast to out's sizes.
template <class A, class B, class Out, class Fn>
void map2(const Tensor& a, const Tensor& b, const Tensor& output, Fn fn) {
  Operands<3> operands;
  operands.data = {static_cast<char*>(a.raw_data()), static_cast<char*>(b.raw_data()),
                   static_cast<char*>(output.raw_data())};
  operands.byte_strides = {broadcast_byte_strides(a, output.sizes()),
                           broadcast_byte_strides(b, output.sizes()),
                           broadcast_byte_strides(output, output.sizes())};
  Shape sizes = output.sizes();
  to_memory_order(sizes, operands, /*leading=*/2);
  for_each_run<3>(sizes, operands, true,
                  [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
                    if (s[0] == sizeof(A) && s[1] == sizeof(B) && s[2] == sizeof(Out)) {
                      const A* x = reinterpret_cast<const A*>(p[0]);
                      const B* y = reinterpret_cast<const B*>(p[1]);
                      Out* out = reinterpret_cast<Out*>(p[2]);
                      for (int64_t i = 0; i < n; ++i) out[i] = fn(x[i], y[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) {
                        *reinterpret_cast<Out*>(p[2] + i * s[2]) =
                            fn(*reinterpret_cast<const A*>(p[0] + i * s[0]),
                               *reinterpret_cast<const B*>(p[1] + i * s[1]));
                      }
                    }
                  });
}

}  // namespace mg::cpu
