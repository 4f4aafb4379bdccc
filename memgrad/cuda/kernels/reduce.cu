// cuda/kernels/reduce.cu — CUDA reductions (sum, max, min over any dims) and argmax.
//
// Every reduction is brought to one form, (outer, reduced, inner): element (a, r, b) sits at
// a * stride_outer + r * stride_reduced + b * stride_inner and output (a, b) at a * inner + b.
// That covers reducing trailing dims (row sums), leading dims (a bias gradient (N, C) ->
// (C)), a block in the middle, everything, and strided or expanded (stride 0) inputs whose
// reduced dims fold into one stride. Anything else (reduced dims interleaved with kept
// ones) is first copied, kept dims first, to a contiguous (outer, reduced) tensor.
//
// Two kernels do the work:
//   rows    (inner == 1): a warp per row (reduced <= 1024) or a block per row;
//   columns (inner > 1):  32 outputs per block, coalesced across them, 16 threads per
//                         output splitting the reduced extent.
// When the outputs are too few to fill the GPU (a full sum, a 4096 x 512 gradient summed
// over its rows), the reduced extent is split across blocks: each writes a partial result
// to a TEMPORARY tensor from the caching allocator, and a second launch of the same kernel
// reduces the partials. No atomics, so results do not depend on scheduling.
//
// NOTE: accumulation precision. The CPU sums every floating type in double. Here float32
// (and float16/bfloat16) accumulate in float, float64 in double, integers and bool in
// int64. Float is enough because the sum is not one long running total: each thread sums
// a strided share of the input (16 elements per thread for a 2^22-element sum, which is
// split across ~500 blocks), and the shares are combined as a tree (shuffles, shared
// memory, the second pass), so rounding error grows with the share plus log2(n), not
// with n. A 2^22-element float32 sum agrees with the CPU's to ~1e-6 relative (the tests
// ask 1e-5). Max and min are exact; NaN wins them, as on the CPU.
//
// argmax walks (outer, extent, inner) lines of a contiguous input: rows (inner == 1) like
// the rows kernel, with (value, index) pairs; otherwise a thread per line, in order.
#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "memgrad/core/factory.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/row_reduce.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// What a reduction of T accumulates in (see the NOTE at the top).
template <class T>
using accumulator_t = std::conditional_t<std::is_same_v<T, double>, double,
                                         std::conditional_t<std::is_floating_point_v<compute_t<T>>, float, int64_t>>;

template <class Acc>
__device__ __forceinline__ bool is_nan(Acc value) {
  if constexpr (std::is_floating_point_v<Acc>) {
    return value != value;
  } else {
    return false;
  }
}

// ---- the combine rule of each op ----

template <ReduceOp Op, class Acc>
struct Combine {
  __device__ __forceinline__ static Acc identity() {
    if constexpr (Op == ReduceOp::Sum) {
      return Acc(0);
    } else if constexpr (Op == ReduceOp::Max) {
      if constexpr (std::is_floating_point_v<Acc>) return -std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::lowest();
    } else {
      if constexpr (std::is_floating_point_v<Acc>) return std::numeric_limits<Acc>::infinity();
      else return std::numeric_limits<Acc>::max();
    }
  }
  // NaN wins max and min: a NaN value replaces the total, and a NaN total fails every
  // comparison, so it stays.
  __device__ __forceinline__ Acc operator()(Acc total, Acc value) const {
    if constexpr (Op == ReduceOp::Sum) {
      return total + value;
    } else if constexpr (Op == ReduceOp::Max) {
      return is_nan(value) || value > total ? value : total;
    } else {
      return is_nan(value) || value < total ? value : total;
    }
  }
};

// The running best of an argmax: its value and index.
template <class C>
struct Candidate {
  C value;
  int64_t index;
};

// Whether candidate a beats b: NaN beats everything (the first NaN wins), then the larger
// value, then the smaller index (ties go to the first occurrence, as on the CPU).
// Commutative and associative, so any tree of combinations gives the CPU's answer.
template <class C>
__device__ __forceinline__ Candidate<C> better(Candidate<C> a, Candidate<C> b) {
  bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.index < b.index ? a : b;
    return a_nan ? a : b;
  }
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}

// ---- cooperative reductions ----

// argmax's candidates cross lanes as their two fields (see cuda/kernels/row_reduce.cuh).
template <class C>
__device__ __forceinline__ Candidate<C> shuffle_xor(Candidate<C> candidate, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, candidate.value, lane_mask),
          __shfl_xor_sync(0xffffffffu, candidate.index, lane_mask)};
}


// ---- the (outer, reduced, inner) reduction ----

struct ReduceShape {
  int64_t outer = 1, reduced = 1, inner = 1;
  int64_t stride_outer = 0, stride_reduced = 0, stride_inner = 0;  // in elements
};

constexpr int kColumnThreadsX = 32;  // outputs per block of the columns kernel
constexpr int kColumnThreadsY = 16;  // threads sharing one output's reduced extent (a power of 2)

// inner == 1. blockIdx.y picks the chunk [blockIdx.y * chunk, ...) of each row; with one
// chunk the row's result goes to output[row], else its partial to partials[row * chunks + chunk].
template <ReduceOp Op, class In, class Acc, class Out>
__global__ void reduce_rows_kernel(const In* input, ReduceShape shape, int64_t chunk, Out* output,
                                   Acc* partials) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= shape.outer) return;  // a whole warp (rows_per_block > 1 only with 32-thread rows)
  Combine<Op, Acc> combine;
  int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  int64_t end = min(shape.reduced, begin + chunk);
  const In* line = input + row * shape.stride_outer;
  Acc total = combine.identity();
  for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
    total = combine(total, to_compute<Acc>(line[r * shape.stride_reduced]));
  }
  total = reduce_across_row(total, combine);
  if (threadIdx.x == 0) {
    if (gridDim.y == 1) {
      output[row] = from_compute<Out>(total);
    } else {
      partials[row * gridDim.y + blockIdx.y] = total;
    }
  }
}

// inner > 1. Thread x of a block is output column blockIdx.x * 32 + x (= a * inner + b);
// the kColumnThreadsY threads of a column split its chunk of the reduced extent and
// combine through shared memory. With several chunks (gridDim.y), partials are laid out
// (chunks, columns), which the second pass reduces as (1, chunks, columns).
template <ReduceOp Op, class In, class Acc, class Out>
__global__ void reduce_columns_kernel(const In* input, ReduceShape shape, int64_t chunk, Out* output,
                                      Acc* partials) {
  __shared__ Acc totals[kColumnThreadsY][kColumnThreadsX + 1];
  Combine<Op, Acc> combine;
  int64_t columns = shape.outer * shape.inner;
  int64_t column = static_cast<int64_t>(blockIdx.x) * kColumnThreadsX + threadIdx.x;
  Acc total = combine.identity();
  if (column < columns) {
    int64_t a = column / shape.inner, b = column - a * shape.inner;
    const In* line = input + a * shape.stride_outer + b * shape.stride_inner;
    int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
    int64_t end = min(shape.reduced, begin + chunk);
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnThreadsY) {
      total = combine(total, to_compute<Acc>(line[r * shape.stride_reduced]));
    }
  }
  totals[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  for (int half = kColumnThreadsY / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      totals[threadIdx.y][threadIdx.x] = combine(totals[threadIdx.y][threadIdx.x], totals[threadIdx.y + half][threadIdx.x]);
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && column < columns) {
    if (gridDim.y == 1) {
      output[column] = from_compute<Out>(totals[0][threadIdx.x]);
    } else {
      partials[static_cast<int64_t>(blockIdx.y) * columns + column] = totals[0][threadIdx.x];
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How many chunks to split each output's reduced extent into: enough blocks to cover the
// GPU a few times over, but never chunks so short that a thread reads fewer than
// kMinElementsPerThread elements (the second pass would then cost more than it saves).
int64_t chunk_count(Device device, int64_t blocks, int64_t reduced, int64_t threads_per_output) {
  constexpr int64_t kMinElementsPerThread = 16;
  int64_t target_blocks = 4 * static_cast<int64_t>(multiprocessor_count(device));
  if (blocks >= target_blocks) return 1;
  int64_t chunks = std::min(ceil_div(target_blocks, blocks), ceil_div(reduced, threads_per_output * kMinElementsPerThread));
  return std::clamp<int64_t>(chunks, 1, 65535);
}

template <ReduceOp Op, class In, class Acc, class Out>
void launch_reduce(const In* input, const ReduceShape& shape, Out* output, Device device, cudaStream_t stream) {
  if (shape.inner == 1) {
    // A warp per row when a row is short; else a block of 512 threads per row.
    int threads_x = shape.reduced <= 1024 ? 32 : 512;
    int rows_per_block = threads_x == 32 ? 8 : 1;
    int64_t blocks = ceil_div(shape.outer, rows_per_block);
    int64_t chunks = chunk_count(device, blocks, shape.reduced, threads_x);
    int64_t chunk = ceil_div(shape.reduced, chunks);
    chunks = std::max<int64_t>(1, ceil_div(shape.reduced, chunk));
    MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "reduce: ", shape.outer, " rows are too many for one launch");
    dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks));
    dim3 block(threads_x, rows_per_block);
    if (chunks == 1) {
      reduce_rows_kernel<Op, In, Acc, Out><<<grid, block, 0, stream>>>(input, shape, chunk, output, nullptr);
      MG_CUDA_CHECK_LAUNCH();
      return;
    }
    Tensor partials = empty({shape.outer, chunks}, {.dtype = dtype_of<Acc>, .device = device});  // (outer, chunks)
    Acc* partial_data = static_cast<Acc*>(partials.raw_data());
    reduce_rows_kernel<Op, In, Acc, Out><<<grid, block, 0, stream>>>(input, shape, chunk, output, partial_data);
    MG_CUDA_CHECK_LAUNCH();
    ReduceShape second{.outer = shape.outer, .reduced = chunks, .inner = 1,
                       .stride_outer = chunks, .stride_reduced = 1, .stride_inner = 0};
    launch_reduce<Op, Acc, Acc, Out>(partial_data, second, output, device, stream);
    return;
  }
  int64_t columns = shape.outer * shape.inner;
  int64_t blocks = ceil_div(columns, kColumnThreadsX);
  int64_t chunks = chunk_count(device, blocks, shape.reduced, kColumnThreadsY);
  int64_t chunk = ceil_div(shape.reduced, chunks);
  chunks = std::max<int64_t>(1, ceil_div(shape.reduced, chunk));
  MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "reduce: ", columns, " outputs are too many for one launch");
  dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks));
  dim3 block(kColumnThreadsX, kColumnThreadsY);
  if (chunks == 1) {
    reduce_columns_kernel<Op, In, Acc, Out><<<grid, block, 0, stream>>>(input, shape, chunk, output, nullptr);
    MG_CUDA_CHECK_LAUNCH();
    return;
  }
  Tensor partials = empty({chunks, columns}, {.dtype = dtype_of<Acc>, .device = device});  // (chunks, columns)
  Acc* partial_data = static_cast<Acc*>(partials.raw_data());
  reduce_columns_kernel<Op, In, Acc, Out><<<grid, block, 0, stream>>>(input, shape, chunk, output, partial_data);
  MG_CUDA_CHECK_LAUNCH();
  ReduceShape second{.outer = 1, .reduced = chunks, .inner = columns,
                     .stride_outer = 0, .stride_reduced = columns, .stride_inner = 1};
  launch_reduce<Op, Acc, Acc, Out>(partial_data, second, output, device, stream);
}

// The (outer, reduced, inner) form of reducing `input` to keepdim `output_sizes`, when the
// input's strides allow one: its non-trivial dims, merged where they walk memory as one,
// must be [kept] reduced [kept].
bool fold_to_shape(const Tensor& input, const Shape& output_sizes, ReduceShape& shape) {
  struct Run {
    bool reduced;
    int64_t size, stride;
  };
  std::array<Run, kMaxDims> runs{};  // innermost first
  int count = 0;
  for (int d = input.dim() - 1; d >= 0; --d) {
    int64_t size = input.sizes()[d], stride = input.strides()[d];
    if (size == 1) continue;
    bool reduced = output_sizes[d] == 1;
    if (count > 0 && runs[count - 1].reduced == reduced && stride == runs[count - 1].stride * runs[count - 1].size) {
      runs[count - 1].size *= size;  // dim d continues the run: one stride walks both
    } else {
      runs[count++] = {reduced, size, stride};
    }
  }
  int next = 0;  // runs are innermost first: [inner] reduced [outer]
  if (next < count && !runs[next].reduced) {
    shape.inner = runs[next].size, shape.stride_inner = runs[next].stride;
    ++next;
  }
  if (next >= count || !runs[next].reduced) return false;
  shape.reduced = runs[next].size, shape.stride_reduced = runs[next].stride;
  ++next;
  if (next < count && !runs[next].reduced) {
    shape.outer = runs[next].size, shape.stride_outer = runs[next].stride;
    ++next;
  }
  // Anything left (a second reduced or kept run that did not merge) needs the copy.
  return next == count;
}

// The value an empty reduction gives (as the CPU's identity), as a fill value.
template <class T>
double identity_value(ReduceOp op) {
  if (op == ReduceOp::Sum) return 0.0;
  bool is_max = op == ReduceOp::Max;
  if constexpr (std::is_floating_point_v<compute_t<T>>) {
    return is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  } else if constexpr (std::is_same_v<T, bool>) {
    return is_max ? 0.0 : 1.0;
  } else {
    return static_cast<double>(is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
  }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& input, const Tensor& output) {
  if (output.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  if (input.numel() == output.numel()) {
    // Nothing to combine (every reduced dim has size 1): the output is the input, converted.
    cuda::copy(input, output);
    return;
  }
  // The kernels write a contiguous output of the natural dtype: the input's, or int64 for
  // sums of integers and bool. Anything else goes through a temporary and a copy.
  DType natural = op == ReduceOp::Sum && !is_floating(input.dtype()) ? DType::Int64 : input.dtype();
  bool direct = output.is_contiguous() && output.dtype() == natural;
  Tensor result = direct ? output : empty(output.sizes(), {.dtype = natural, .device = device});

  if (input.numel() == 0) {
    dispatch_dtype(input.dtype(), [&]<class T>() { cuda::fill(result, identity_value<T>(op)); });
  } else {
    ReduceShape shape;
    Tensor source = input;
    if (!fold_to_shape(input, output.sizes(), shape)) {
      // Reduced dims interleave with kept ones: copy kept dims first, then reduced dims.
      Shape sizes, strides;
      int64_t kept = 1, reduced = 1;
      for (int pass = 0; pass < 2; ++pass) {
        for (int d = 0; d < input.dim(); ++d) {
          bool is_reduced = output.sizes()[d] == 1;
          if (is_reduced != (pass == 1)) continue;
          sizes.push_back(input.sizes()[d]);
          strides.push_back(input.strides()[d]);
          (is_reduced ? reduced : kept) *= input.sizes()[d];
        }
      }
      source = contiguous_copy(make_view(input, sizes, strides, input.storage_offset()));  // (kept..., reduced...)
      shape = ReduceShape{.outer = kept, .reduced = reduced, .inner = 1,
                          .stride_outer = reduced, .stride_reduced = 1, .stride_inner = 0};
    }
    if (shape.inner == 1 && shape.outer > 1 && shape.stride_outer == 1 && shape.stride_reduced != 1) {
      // Rows lie across memory (a transposed input): walking outputs as columns coalesces.
      shape = ReduceShape{.outer = 1, .reduced = shape.reduced, .inner = shape.outer,
                          .stride_outer = 0, .stride_reduced = shape.stride_reduced, .stride_inner = 1};
    }
    cudaStream_t stream = current_stream(device);
    dispatch_dtype(source.dtype(), [&]<class T>() {
      using In = device_t<T>;
      using Acc = accumulator_t<T>;
      const In* in = static_cast<const In*>(source.raw_data());
      switch (op) {
        case ReduceOp::Sum: {
          using Out = std::conditional_t<std::is_floating_point_v<compute_t<T>>, In, int64_t>;
          launch_reduce<ReduceOp::Sum, In, Acc, Out>(in, shape, static_cast<Out*>(result.raw_data()), device, stream);
          break;
        }
        case ReduceOp::Max:
          launch_reduce<ReduceOp::Max, In, Acc, In>(in, shape, static_cast<In*>(result.raw_data()), device, stream);
          break;
        case ReduceOp::Min:
          launch_reduce<ReduceOp::Min, In, Acc, In>(in, shape, static_cast<In*>(result.raw_data()), device, stream);
          break;
      }
    });
  }
  if (!direct) cuda::copy(result, output);
}

// ---- argmax ----

namespace {

// inner == 1: a warp or a block per row, as reduce_rows_kernel.
template <class In, class C>
__global__ void argmax_rows_kernel(const In* input, int64_t rows, int64_t extent, int64_t* output) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const In* line = input + row * extent;
  // The identity loses to every element: to a larger value, or to an equal one (the
  // lowest, -inf) by its index.
  Candidate<C> best{Combine<ReduceOp::Max, C>::identity(), std::numeric_limits<int64_t>::max()};
  for (int64_t k = threadIdx.x; k < extent; k += blockDim.x) best = better(best, Candidate<C>{to_compute<C>(line[k]), k});
  best = reduce_across_row(best, [](Candidate<C> a, Candidate<C> b) { return better(a, b); });
  if (threadIdx.x == 0) output[row] = best.index;
}

// inner > 1: a thread per (o, i) line, walking it in order (coalesced across i).
template <class In, class C>
__global__ void argmax_lines_kernel(const In* input, int64_t outer, int64_t extent, int64_t inner, int64_t* output) {
  int64_t line_index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (line_index >= outer * inner) return;
  int64_t o = line_index / inner, i = line_index - o * inner;
  const In* line = input + o * extent * inner + i;
  Candidate<C> best{to_compute<C>(line[0]), 0};
  for (int64_t k = 1; k < extent; ++k) best = better(best, Candidate<C>{to_compute<C>(line[k * inner]), k});
  output[line_index] = best.index;
}

}  // namespace

void argmax(const Tensor& input, int dim, const Tensor& output) {
  if (output.numel() == 0) return;
  Device device = input.device();
  DeviceGuard guard(device);
  Tensor source = input.is_contiguous() ? input : contiguous_copy(input);
  int64_t outer = 1, inner = 1, extent = source.sizes()[dim];
  for (int d = 0; d < dim; ++d) outer *= source.sizes()[d];
  for (int d = dim + 1; d < source.dim(); ++d) inner *= source.sizes()[d];
  Tensor result = output.is_contiguous() ? output : empty(output.sizes(), {.dtype = DType::Int64, .device = device});
  int64_t* indices = static_cast<int64_t*>(result.raw_data());
  cudaStream_t stream = current_stream(device);
  dispatch_dtype(source.dtype(), [&]<class T>() {
    using In = device_t<T>;
    using C = accumulator_t<T>;
    const In* values = static_cast<const In*>(source.raw_data());
    if (inner == 1) {
      int threads_x = extent <= 1024 ? 32 : 512;
      int rows_per_block = threads_x == 32 ? 8 : 1;
      int64_t blocks = ceil_div(outer, rows_per_block);
      MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "argmax: ", outer, " rows are too many for one launch");
      argmax_rows_kernel<In, C><<<static_cast<unsigned>(blocks), dim3(threads_x, rows_per_block), 0, stream>>>(
          values, outer, extent, indices);
    } else {
      constexpr int kThreads = 256;
      int64_t blocks = ceil_div(outer * inner, kThreads);
      MG_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "argmax: ", outer * inner, " lines are too many for one launch");
      argmax_lines_kernel<In, C><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(values, outer, extent, inner,
                                                                                         indices);
    }
    MG_CUDA_CHECK_LAUNCH();
  });
  if (!result.is_same(output)) cuda::copy(result, output);
}

}  // namespace mg::cuda
