// core/cpu/reduce.cpp — CPU reductions (sum, max, min over any dims) and argmax.
//
// Sums accumulate in double (int64 for integers) whatever the element type, so a float32
// mean over a whole dataset does not drift. Contiguous sums that keep one block of adjacent
// dims (a bias gradient: (N, C, H, W) -> C) and sums of trailing runs take fast paths whose
// order of additions is fixed by the shapes alone, so results do not depend on the threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "memgrad/core/cpu/cpu_kernels.h"
#include "memgrad/core/cpu/strided_loop.h"
#include "memgrad/core/factory.h"

namespace mg::cpu {

namespace {

template <class Acc>
Acc identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return Acc(0);
    case ReduceOp::Max: return std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                                      : std::numeric_limits<Acc>::lowest();
    case ReduceOp::Min: return std::numeric_limits<Acc>::has_infinity ? std::numeric_limits<Acc>::infinity()
                                                                      : std::numeric_limits<Acc>::max();
  }
  return Acc(0);
}

// NaN wins max and min, as in PyTorch.
template <class Acc>
Acc combine(ReduceOp op, Acc total, Acc value) {
  switch (op) {
    case ReduceOp::Sum: return total + value;
    case ReduceOp::Max:
      if constexpr (std::is_floating_point_v<Acc>) if (std::isnan(value)) return value;
      return value > total ? value : total;
    case ReduceOp::Min:
      if constexpr (std::is_floating_point_v<Acc>) if (std::isnan(value)) return value;
      return value < total ? value : total;
  }
  return total;
}

// True when the reduced dims are exactly the trailing ones of a contiguous input, so each
// output element reduces one contiguous run.
bool reduces_trailing_run(const Tensor& input, const Tensor& output) {
  if (!input.is_contiguous()) return false;
  int first_reduced = input.dim();
  while (first_reduced > 0 && output.sizes()[first_reduced - 1] == 1) --first_reduced;
  for (int d = 0; d < first_reduced; ++d) {
    if (output.sizes()[d] != input.sizes()[d]) return false;
  }
  return true;
}

// The sum of one contiguous run, in kLanes interleaved partial sums so that the additions
// vectorize (the fixed interleaving keeps the result the same run to run).
template <class T, class Acc>
Acc sum_run(const T* values, int64_t count) {
  constexpr int kLanes = 16;
  Acc lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += static_cast<Acc>(static_cast<compute_t<T>>(values[i + l]));
  }
  Acc total = 0;
  for (; i < count; ++i) total += static_cast<Acc>(static_cast<compute_t<T>>(values[i]));
  for (Acc lane : lanes) total += lane;
  return total;
}

// A contiguous input seen as (outer, kept, inner) where the output keeps exactly the middle
// block of dims: outer == 0 when the reduction does not have that form.
struct KeptBlock {
  int64_t outer = 0, kept = 1, inner = 1;
};

KeptBlock kept_block(const Tensor& input, const Tensor& output) {
  if (!input.is_contiguous() || !output.is_contiguous() || output.dim() != input.dim()) return {};
  const Shape& in = input.sizes();
  const Shape& out = output.sizes();
  // Dims of size 1 are neither kept nor reduced; of the others, the kept ones must be adjacent.
  int first = -1, last = -1;
  for (int d = 0; d < input.dim(); ++d) {
    if (in[d] == 1) continue;
    if (out[d] == in[d]) {
      if (first < 0) first = d;
      last = d;
    } else if (out[d] != 1) {
      return {};
    }
  }
  if (first < 0) return {};
  for (int d = first; d <= last; ++d) {
    if (in[d] != 1 && out[d] != in[d]) return {};
  }
  KeptBlock block{1, 1, 1};
  for (int d = 0; d < input.dim(); ++d) (d < first ? block.outer : d <= last ? block.kept : block.inner) *= in[d];
  return block;
}

// out[k] = the sum over (a, i) of in[a][k][i], accumulated a by a.
template <class T, class Acc>
void sum_kept_block(const T* in, const KeptBlock& block, Acc* totals) {
  bool parallel = block.outer * block.kept * block.inner >= kParallelGrain;
  if (block.inner == 1) {
    // Rows of kept values: add each row to the totals (vectorizes across k).
    constexpr int64_t kColumns = 1024;
#pragma omp parallel for schedule(static) if (parallel && block.kept > kColumns)
    for (int64_t k0 = 0; k0 < block.kept; k0 += kColumns) {
      int64_t k1 = std::min(block.kept, k0 + kColumns);
      std::fill(totals + k0, totals + k1, Acc(0));
      for (int64_t a = 0; a < block.outer; ++a) {
        const T* row = in + a * block.kept;
        for (int64_t k = k0; k < k1; ++k) totals[k] += static_cast<Acc>(static_cast<compute_t<T>>(row[k]));
      }
    }
    return;
  }
#pragma omp parallel for schedule(static) if (parallel && block.kept > 1)
  for (int64_t k = 0; k < block.kept; ++k) {
    Acc total = 0;
    for (int64_t a = 0; a < block.outer; ++a) total += sum_run<T, Acc>(in + (a * block.kept + k) * block.inner, block.inner);
    totals[k] = total;
  }
}

template <class T, class Acc>
void reduce_typed(ReduceOp op, const Tensor& input, const Tensor& output) {
  if (reduces_trailing_run(input, output) && output.is_contiguous()) {
    const T* in = input.data_ptr<T>();
    int64_t outputs = output.numel();
    int64_t run = outputs == 0 ? 0 : input.numel() / outputs;
    Tensor accumulated = empty(output.sizes(), {.dtype = dtype_of<Acc>});
    Acc* totals = accumulated.data_ptr<Acc>();
#pragma omp parallel for schedule(static) if (input.numel() >= kParallelGrain && outputs > 1)
    for (int64_t o = 0; o < outputs; ++o) {
      const T* values = in + o * run;
      if (op == ReduceOp::Sum) {
        totals[o] = sum_run<T, Acc>(values, run);
        continue;
      }
      Acc total = identity<Acc>(op);
      for (int64_t i = 0; i < run; ++i) total = combine<Acc>(op, total, static_cast<Acc>(static_cast<compute_t<T>>(values[i])));
      totals[o] = total;
    }
    copy(accumulated, output);
    return;
  }
  if (KeptBlock block = kept_block(input, output); op == ReduceOp::Sum && block.outer > 0) {
    Tensor accumulated = empty(output.sizes(), {.dtype = dtype_of<Acc>});
    sum_kept_block<T, Acc>(input.data_ptr<T>(), block, accumulated.data_ptr<Acc>());
    copy(accumulated, output);
    return;
  }
  // General case: walk the input once, accumulating into the output position with the
  // reduced dims collapsed (stride 0). Sequential: several runs share an output element.
  Tensor accumulated = empty(output.sizes(), {.dtype = dtype_of<Acc>});
  std::fill_n(accumulated.data_ptr<Acc>(), accumulated.numel(), identity<Acc>(op));
  Operands<2> operands;
  operands.data = {static_cast<char*>(input.raw_data()), static_cast<char*>(accumulated.raw_data())};
  operands.byte_strides = {broadcast_byte_strides(input, input.sizes()),
                           broadcast_byte_strides(accumulated, input.sizes())};
  for_each_run<2>(input.sizes(), operands, false,
                  [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                    for (int64_t i = 0; i < n; ++i) {
                      Acc& total = *reinterpret_cast<Acc*>(p[1] + i * s[1]);
                      T value = *reinterpret_cast<const T*>(p[0] + i * s[0]);
                      total = combine<Acc>(op, total, static_cast<Acc>(static_cast<compute_t<T>>(value)));
                    }
                  });
  copy(accumulated, output);
}

}  // namespace

void reduce(ReduceOp op, const Tensor& input, const Tensor& output) {
  dispatch_dtype(input.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      // Max/min of floats are exact in the element's own precision; sums want double.
      reduce_typed<T, double>(op, input, output);
    } else {
      reduce_typed<T, int64_t>(op, input, output);
    }
  });
}

void argmax(const Tensor& input, int dim, const Tensor& output) {
  Tensor source = input.is_contiguous() ? input : contiguous_copy(input);
  int64_t outer = 1, inner = 1, extent = source.sizes()[dim];
  for (int d = 0; d < dim; ++d) outer *= source.sizes()[d];
  for (int d = dim + 1; d < source.dim(); ++d) inner *= source.sizes()[d];
  Tensor result = output.is_contiguous() ? output : empty_like(output);
  int64_t* indices = result.data_ptr<int64_t>();
  dispatch_dtype(source.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    const T* values = source.data_ptr<T>();
#pragma omp parallel for schedule(static) if (source.numel() >= kParallelGrain)
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* line = values + o * extent * inner + i;
        int64_t best = 0;
        auto best_value = static_cast<C>(line[0]);
        for (int64_t k = 1; k < extent; ++k) {
          auto value = static_cast<C>(line[k * inner]);
          bool value_is_nan = false, best_is_nan = false;
          if constexpr (std::is_floating_point_v<C>) value_is_nan = std::isnan(value), best_is_nan = std::isnan(best_value);
          if (!best_is_nan && (value > best_value || value_is_nan)) best = k, best_value = value;
        }
        indices[o * inner + i] = best;
      }
    }
  });
  if (!result.is_same(output)) copy(result, output);
}

}  // namespace mg::cpu
