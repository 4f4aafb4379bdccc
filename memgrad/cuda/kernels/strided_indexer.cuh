// cuda/kernels/strided_indexer.cuh — what every CUDA elementwise-style kernel shares:
//
//   * StridedIndexer<N>: a small POD, passed to kernels by value, that maps a linear index
//     (row-major over the output's sizes) to the element offsets of up to 3 operands of any
//     strides (broadcast operands have stride 0). Built on the host from Tensors; adjacent
//     dimensions contiguous in every operand are merged first (as core/cpu/strided_loop.h
//     does), so a contiguous tensor becomes one dimension.
//   * launch_config(n): 256 threads a block, a capped grid for grid-stride loops.
//   * Device element types: mg::Half / mg::BFloat16 are read as __half / __nv_bfloat16 (the
//     same 16 bits) and computed in float; convert<Out>(in) follows core/dtype.h's
//     convert_value on the device.
//   * map1 / map2: out = fn(in) / fn(a, b) over broadcast views — a flat kernel with 16-byte
//     vector loads when every operand is dense with the same strides (all contiguous, or
//     all channels-last: the dims are put in memory order first, core/memory_order.h) and
//     aligned, the indexer otherwise.
//
// Everything here is a header because kernels are templates over the functor; the
// functors live in the .cu files that use them (elementwise.cu, copy_fill.cu).
//
// Usage in a kernel:
//   auto indexer = make_strided_indexer(output.sizes(), output, input);  // operand 0 = output
//   ... in device code: Offsets<2> at = indexer.offsets(i); out[at[0]] = f(in[at[1]]);
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "memgrad/core/half.h"
#include "memgrad/core/memory_order.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"  // cudaStream_t mg::cuda::current_stream(Device)

namespace mg::cuda {

// ---------------------------------------------------------------------------------------
// Launch configuration
// ---------------------------------------------------------------------------------------

inline constexpr int kThreadsPerBlock = 256;
// NOTE: grid-stride loops let a capped grid cover any size; 8192 blocks of 256 threads is
// several full waves on an H200 (132 SMs x 2048 threads), so the cap never idles the GPU,
// and larger tensors simply loop.
inline constexpr int64_t kMaxBlocks = 8192;

struct LaunchConfig {
  unsigned blocks;
  unsigned threads;
};

// Blocks of kThreadsPerBlock threads for `work_items` items (one item per thread per
// grid-stride iteration); at least one block.
inline LaunchConfig launch_config(int64_t work_items) {
  int64_t blocks = (std::max<int64_t>(work_items, 1) + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return {static_cast<unsigned>(std::min(blocks, kMaxBlocks)), static_cast<unsigned>(kThreadsPerBlock)};
}

// The global index of the calling thread and the stride of a grid-stride loop.
__device__ __forceinline__ int64_t global_thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---------------------------------------------------------------------------------------
// Element types on the device
// ---------------------------------------------------------------------------------------

// The device-side type of a dtype's C++ type: same size and bits.
template <class T> struct DeviceTypeOf { using type = T; };
template <> struct DeviceTypeOf<Half> { using type = __half; };
template <> struct DeviceTypeOf<BFloat16> { using type = __nv_bfloat16; };
template <class T> using device_t = typename DeviceTypeOf<T>::type;

static_assert(sizeof(__half) == sizeof(Half) && sizeof(__nv_bfloat16) == sizeof(BFloat16));

// The type arithmetic on a device type is carried out in (core/dtype.h's compute_t).
template <class T> struct DeviceComputeOf { using type = T; };
template <> struct DeviceComputeOf<__half> { using type = float; };
template <> struct DeviceComputeOf<__nv_bfloat16> { using type = float; };
template <class T> using device_compute_t = typename DeviceComputeOf<T>::type;

template <class T>
inline constexpr bool is_device_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// static_cast<To>(value) between built-in arithmetic types, except that a floating value
// becomes a narrow integer through int64 (modular, as x86 does it) rather than the GPU's
// saturating conversion: both are undefined behaviour in C++ for values out of range, and
// this keeps such values equal to what the CPU kernels produce.
template <class To, class From>
__host__ __device__ __forceinline__ To arithmetic_cast(From value) {
  if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From> && sizeof(To) < 8) {
    return static_cast<To>(static_cast<int64_t>(value));
  } else {
    return static_cast<To>(value);
  }
}

// A stored value read in compute type C (float for the 16-bit types).
template <class C, class T>
__host__ __device__ __forceinline__ C to_compute(T value) {
  if constexpr (std::is_same_v<T, __half>) {
    return arithmetic_cast<C>(__half2float(value));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return arithmetic_cast<C>(__bfloat162float(value));
  } else {
    return arithmetic_cast<C>(value);
  }
}

// A compute-type value stored as T: static_cast<T>(value) on the CPU. The 16-bit types go
// through float and round to nearest even, as mg::Half / mg::BFloat16 do.
template <class T, class C>
__host__ __device__ __forceinline__ T from_compute(C value) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(value));
  } else {
    return arithmetic_cast<T>(value);
  }
}

// One value converted between device types the way a tensor copy does (convert_value in
// core/dtype.h): through the compute types, and to bool as "non-zero".
template <class Out, class In>
__host__ __device__ __forceinline__ Out convert(In value) {
  using InCompute = device_compute_t<In>;
  if constexpr (std::is_same_v<Out, bool>) {
    return to_compute<InCompute>(value) != InCompute(0);
  } else {
    return from_compute<Out>(arithmetic_cast<device_compute_t<Out>>(to_compute<InCompute>(value)));
  }
}

// A host value of dtype T (e.g. convert_value<T>(scalar)) as its device type: same bits.
template <class T>
device_t<T> to_device_value(const T& value) {
  device_t<T> result;
  std::memcpy(static_cast<void*>(&result), &value, sizeof(T));
  return result;
}

// The tensor's first element as its device type (T is the dtype's C++ type, e.g. mg::Half).
template <class T>
device_t<T>* device_data(const Tensor& tensor) {
  return static_cast<device_t<T>*>(tensor.raw_data());
}

// N elements loaded or stored with one instruction (16 bytes at most).
template <class T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T value[N];
};

// Elements per 16-byte access for the widest of the operand types.
template <class... Ts>
inline constexpr int vector_width_v = static_cast<int>(16 / std::max({sizeof(Ts)...}));

inline bool is_aligned(const void* pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// ---------------------------------------------------------------------------------------
// StridedIndexer
// ---------------------------------------------------------------------------------------

// `#pragma unroll` for code compiled for both host and device (the host compiler warns).
#if defined(__CUDA_ARCH__)
#define MG_DEVICE_UNROLL _Pragma("unroll")
#else
#define MG_DEVICE_UNROLL
#endif

// Unsigned 32-bit division by a fixed divisor with a multiply-high and a shift (Granlund &
// Montgomery; as PyTorch's IntDivider). Exact for dividends below 2^31 and divisors in
// [1, 2^31 - 1]; 64-bit division on the GPU is a long software routine.
struct IntDivider {
  uint32_t divisor = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  IntDivider() = default;
  explicit IntDivider(uint32_t d)
      : divisor(d), shift(static_cast<uint32_t>(std::bit_width(d - 1))) {  // shift = ceil(log2 d)
    uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1;
    multiplier = static_cast<uint32_t>(magic);
  }

  __host__ __device__ __forceinline__ uint32_t divide(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    uint32_t high = __umulhi(n, multiplier);
#else
    auto high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return (high + n) >> shift;
  }
};

// Element offsets of the N operands for one linear index.
template <int N>
struct Offsets {
  int64_t value[N];
  __host__ __device__ __forceinline__ int64_t operator[](int k) const { return value[k]; }
};

// Maps linear index i (row-major over `sizes`) to each operand's element offset
// sum_d index_d * stride_d. Dims are stored innermost first, after merging.
// NOTE: the row-major meaning of i is kept (dims are merged, never reordered), so kernels
// that need element order (random numbers, scans) can rely on it.
template <int N>
struct StridedIndexer {
  static_assert(N >= 1 && N <= 3, "StridedIndexer handles 1 to 3 operands");

  int dims = 0;                      // after merging; 0 for a single element
  bool narrow = true;                // numel < 2^31: divide in 32 bits
  int64_t numel = 1;
  int64_t size[kMaxDims] = {};       // innermost first
  IntDivider divider[kMaxDims] = {};  // of size[d], valid when narrow
  int64_t stride[kMaxDims][N] = {};  // in elements, innermost first

  __host__ __device__ __forceinline__ Offsets<N> offsets(int64_t linear) const {
    Offsets<N> result;
    MG_DEVICE_UNROLL
    for (int k = 0; k < N; ++k) result.value[k] = 0;
    if (narrow) {
      auto remaining = static_cast<uint32_t>(linear);
      MG_DEVICE_UNROLL
      for (int d = 0; d < kMaxDims; ++d) {
        if (d == dims) break;
        uint32_t quotient = divider[d].divide(remaining);
        auto index = static_cast<int64_t>(remaining - quotient * divider[d].divisor);
        remaining = quotient;
        MG_DEVICE_UNROLL
        for (int k = 0; k < N; ++k) result.value[k] += index * stride[d][k];
      }
    } else {
      int64_t remaining = linear;
      MG_DEVICE_UNROLL
      for (int d = 0; d < kMaxDims; ++d) {
        if (d == dims) break;
        int64_t quotient = remaining / size[d];
        int64_t index = remaining - quotient * size[d];
        remaining = quotient;
        MG_DEVICE_UNROLL
        for (int k = 0; k < N; ++k) result.value[k] += index * stride[d][k];
      }
    }
    return result;
  }

  // True when every operand is one contiguous run (offset == linear index): flat kernels
  // can index by i directly.
  bool is_contiguous() const {
    if (dims == 0) return true;
    if (dims > 1) return false;
    for (int k = 0; k < N; ++k) {
      if (stride[0][k] != 1) return false;
    }
    return true;
  }
};

// Strides of `tensor` in elements, aligned to a result of `sizes` (trailing dims match;
// dims where the tensor has size 1 or is missing repeat with stride 0).
inline Shape broadcast_element_strides(const Tensor& tensor, const Shape& sizes) {
  Shape strides = Shape::filled(sizes.size(), 0);
  int offset = sizes.size() - tensor.dim();
  for (int i = 0; i < tensor.dim(); ++i) {
    if (tensor.sizes()[i] != 1) strides[offset + i] = tensor.strides()[i];
  }
  return strides;
}

// An indexer over `sizes` for operands with the given element strides (each of sizes'
// rank). Drops size-1 dims and merges an outer dim into the next inner one when, for every
// operand, stride[outer] == stride[inner] * size[inner].
template <int N>
StridedIndexer<N> make_strided_indexer(const Shape& sizes, const std::array<Shape, N>& strides) {
  StridedIndexer<N> indexer;
  indexer.numel = sizes.numel();
  if (indexer.numel == 0) return indexer;  // nothing to index (and no size to divide by)
  // Merge outermost-first (like strided_loop.h), then store innermost first.
  int64_t merged_size[kMaxDims];
  int64_t merged_stride[kMaxDims][N];
  int merged = 0;
  for (int d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool mergeable = merged > 0;
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = merged_stride[merged - 1][k] == strides[k][d] * sizes[d];
    }
    if (mergeable) {
      merged_size[merged - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) merged_stride[merged - 1][k] = strides[k][d];
    } else {
      merged_size[merged] = sizes[d];
      for (int k = 0; k < N; ++k) merged_stride[merged][k] = strides[k][d];
      ++merged;
    }
  }
  indexer.dims = merged;
  indexer.narrow = indexer.numel <= INT32_MAX;
  for (int d = 0; d < merged; ++d) {
    int source = merged - 1 - d;
    indexer.size[d] = merged_size[source];
    if (indexer.narrow) indexer.divider[d] = IntDivider(static_cast<uint32_t>(merged_size[source]));
    for (int k = 0; k < N; ++k) indexer.stride[d][k] = merged_stride[source][k];
  }
  return indexer;
}

// An indexer over `sizes` for tensors broadcast to them; operand k is the k-th tensor
// (by convention the output first).
template <class... Tensors>
StridedIndexer<sizeof...(Tensors)> make_strided_indexer(const Shape& sizes, const Tensors&... operands) {
  return make_strided_indexer<sizeof...(Tensors)>(
      sizes, std::array<Shape, sizeof...(Tensors)>{broadcast_element_strides(operands, sizes)...});
}

// An indexer for an elementwise map or fill over `sizes` (operand 0 = the output): like
// make_strided_indexer, but with the dims first put in memory order (the output's layout
// deciding first), so operands that are all channels-last merge into one flat run. The
// linear index then no longer follows row-major order: only for kernels whose result does
// not depend on the visiting order.
template <class... Tensors>
StridedIndexer<sizeof...(Tensors)> make_elementwise_indexer(const Shape& sizes, const Tensors&... operands) {
  constexpr int N = sizeof...(Tensors);
  std::array<Shape, N> strides{broadcast_element_strides(operands, sizes)...};
  Shape order = memory_order(sizes, strides);
  for (Shape& operand_strides : strides) operand_strides = permuted(operand_strides, order);
  return make_strided_indexer<N>(permuted(sizes, order), strides);
}

// ---------------------------------------------------------------------------------------
// map1 / map2: elementwise maps over broadcast views
// ---------------------------------------------------------------------------------------

// Flat kernels: each thread maps kVec consecutive elements per iteration through aligned
// vector loads and stores; the last count % kVec elements go to the first threads.
template <int kVec, class Fn, class Out, class In>
__global__ void __launch_bounds__(kThreadsPerBlock)
    map1_vectorized_kernel(Fn fn, int64_t count, Out* out, const In* in) {
  int64_t vectors = count / kVec;
  int64_t thread = global_thread_index();
  for (int64_t v = thread; v < vectors; v += grid_stride()) {
    AlignedVector<In, kVec> x = reinterpret_cast<const AlignedVector<In, kVec>*>(in)[v];
    AlignedVector<Out, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) y.value[j] = fn(x.value[j]);
    reinterpret_cast<AlignedVector<Out, kVec>*>(out)[v] = y;
  }
  int64_t tail = vectors * kVec + thread;
  if (tail < count) out[tail] = fn(in[tail]);
}

template <class Fn, class Out, class In>
__global__ void __launch_bounds__(kThreadsPerBlock)
    map1_strided_kernel(Fn fn, StridedIndexer<2> indexer, Out* out, const In* in) {
  for (int64_t i = global_thread_index(); i < indexer.numel; i += grid_stride()) {
    Offsets<2> at = indexer.offsets(i);
    out[at[0]] = fn(in[at[1]]);
  }
}

template <int kVec, class Fn, class Out, class A, class B>
__global__ void __launch_bounds__(kThreadsPerBlock)
    map2_vectorized_kernel(Fn fn, int64_t count, Out* out, const A* a, const B* b) {
  int64_t vectors = count / kVec;
  int64_t thread = global_thread_index();
  for (int64_t v = thread; v < vectors; v += grid_stride()) {
    AlignedVector<A, kVec> x = reinterpret_cast<const AlignedVector<A, kVec>*>(a)[v];
    AlignedVector<B, kVec> y = reinterpret_cast<const AlignedVector<B, kVec>*>(b)[v];
    AlignedVector<Out, kVec> z;
#pragma unroll
    for (int j = 0; j < kVec; ++j) z.value[j] = fn(x.value[j], y.value[j]);
    reinterpret_cast<AlignedVector<Out, kVec>*>(out)[v] = z;
  }
  int64_t tail = vectors * kVec + thread;
  if (tail < count) out[tail] = fn(a[tail], b[tail]);
}

template <class Fn, class Out, class A, class B>
__global__ void __launch_bounds__(kThreadsPerBlock)
    map2_strided_kernel(Fn fn, StridedIndexer<3> indexer, Out* out, const A* a, const B* b) {
  for (int64_t i = global_thread_index(); i < indexer.numel; i += grid_stride()) {
    Offsets<3> at = indexer.offsets(i);
    out[at[0]] = fn(a[at[1]], b[at[2]]);
  }
}

// output[i] = fn(input[i]) over output's sizes, input broadcast to them. Out and In are
// device types (device_t<T>); fn is a device functor In -> Out. Launches on the output
// device's current stream; the caller makes that device current (DeviceGuard). Output must
// not overlap input except exactly (in place). kVectorize = false
// instantiates only the strided kernel (for rarely used types: less to compile).
template <class Out, class In, bool kVectorize = true, class Fn>
void map1(const Tensor& input, const Tensor& output, Fn fn) {
  if (output.numel() == 0) return;
  auto* out = static_cast<Out*>(output.raw_data());
  const auto* in = static_cast<const In*>(input.raw_data());
  cudaStream_t stream = current_stream(output.device());
  StridedIndexer<2> indexer = make_elementwise_indexer(output.sizes(), output, input);
  if constexpr (kVectorize) {
    constexpr int kVec = vector_width_v<Out, In>;
    if (indexer.is_contiguous() && is_aligned(out, sizeof(Out) * kVec) && is_aligned(in, sizeof(In) * kVec)) {
      LaunchConfig config = launch_config(indexer.numel / kVec);
      map1_vectorized_kernel<kVec><<<config.blocks, config.threads, 0, stream>>>(fn, indexer.numel, out, in);
      MG_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  LaunchConfig config = launch_config(indexer.numel);
  map1_strided_kernel<<<config.blocks, config.threads, 0, stream>>>(fn, indexer, out, in);
  MG_CUDA_CHECK_LAUNCH();
}

// output[i] = fn(a[i], b[i]) with a and b broadcast to output's sizes.
template <class Out, class A, class B, bool kVectorize = true, class Fn>
void map2(const Tensor& a, const Tensor& b, const Tensor& output, Fn fn) {
  if (output.numel() == 0) return;
  auto* out = static_cast<Out*>(output.raw_data());
  const auto* a_data = static_cast<const A*>(a.raw_data());
  const auto* b_data = static_cast<const B*>(b.raw_data());
  cudaStream_t stream = current_stream(output.device());
  StridedIndexer<3> indexer = make_elementwise_indexer(output.sizes(), output, a, b);
  if constexpr (kVectorize) {
    constexpr int kVec = vector_width_v<Out, A, B>;
    if (indexer.is_contiguous() && is_aligned(out, sizeof(Out) * kVec) && is_aligned(a_data, sizeof(A) * kVec) &&
        is_aligned(b_data, sizeof(B) * kVec)) {
      LaunchConfig config = launch_config(indexer.numel / kVec);
      map2_vectorized_kernel<kVec><<<config.blocks, config.threads, 0, stream>>>(fn, indexer.numel, out, a_data,
                                                                                b_data);
      MG_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  LaunchConfig config = launch_config(indexer.numel);
  map2_strided_kernel<<<config.blocks, config.threads, 0, stream>>>(fn, indexer, out, a_data, b_data);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace mg::cuda
