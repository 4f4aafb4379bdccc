// cuda/kernels/copy_fill.cu — CUDA copies with dtype conversion, fills, and random fills.
//
// Semantics are core/cpu/copy_fill.cpp's: conversions as convert_value (to bool is
// "non-zero"), and random element i uses Philox block offset + i, so a seed gives the same
// numbers on either device.
#include <cmath>
#include <numbers>

#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

// ---- copy ----

template <class Out, class In>
struct ConvertElement {
  __host__ __device__ Out operator()(In value) const { return convert<Out>(value); }
};

template <class T>
struct IdentityElement {
  __device__ T operator()(T value) const { return value; }
};

// An unsigned type of `bytes` bytes: a copy within one dtype moves bits.
template <size_t bytes> struct BitsOf;
template <> struct BitsOf<1> { using type = uint8_t; };
template <> struct BitsOf<2> { using type = uint16_t; };
template <> struct BitsOf<4> { using type = uint32_t; };
template <> struct BitsOf<8> { using type = uint64_t; };

template <class In, class Out>
void copy_converting(const Tensor& source, const Tensor& destination) {
  // NOTE: only conversions among the floating types (autocast's casts) get the vectorised
  // kernel; the others are rare and compile to the strided kernel alone.
  constexpr bool kVectorize = is_device_floating_v<In> && is_device_floating_v<Out>;
  map1<Out, In, kVectorize>(source, destination, ConvertElement<Out, In>{});
}

// ---- fill ----

template <int kVec, class T>
__global__ void __launch_bounds__(kThreadsPerBlock) fill_vectorized_kernel(T value, int64_t count, T* out) {
  AlignedVector<T, kVec> values;
#pragma unroll
  for (int j = 0; j < kVec; ++j) values.value[j] = value;
  int64_t vectors = count / kVec;
  int64_t thread = global_thread_index();
  for (int64_t v = thread; v < vectors; v += grid_stride()) {
    reinterpret_cast<AlignedVector<T, kVec>*>(out)[v] = values;
  }
  int64_t tail = vectors * kVec + thread;
  if (tail < count) out[tail] = value;
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock) fill_strided_kernel(T value, StridedIndexer<1> indexer, T* out) {
  for (int64_t i = global_thread_index(); i < indexer.numel; i += grid_stride()) out[indexer.offsets(i)[0]] = value;
}

template <class HostT>
void fill_typed(const Tensor& destination, double value) {
  using T = device_t<HostT>;
  HostT typed = convert_value<HostT>(value);  // the CPU's conversion, on the host
  T device_value = to_device_value(typed);
  T* out = device_data<HostT>(destination);
  cudaStream_t stream = current_stream(destination.device());
  StridedIndexer<1> indexer = make_elementwise_indexer(destination.sizes(), destination);
  if (indexer.is_contiguous()) {
    // Zero bytes (0, false, +0.0 — not -0.0) are a memset.
    HostT zero{};
    if (std::memcmp(&typed, &zero, sizeof(HostT)) == 0) {
      MG_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(indexer.numel) * sizeof(T), stream));
      return;
    }
    constexpr int kVec = vector_width_v<T>;
    if (is_aligned(out, sizeof(T) * kVec)) {
      LaunchConfig config = launch_config(indexer.numel / kVec);
      fill_vectorized_kernel<kVec><<<config.blocks, config.threads, 0, stream>>>(device_value, indexer.numel, out);
      MG_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  LaunchConfig config = launch_config(indexer.numel);
  fill_strided_kernel<<<config.blocks, config.threads, 0, stream>>>(device_value, indexer, out);
  MG_CUDA_CHECK_LAUNCH();
}

// ---- random fills ----

constexpr double kTwoPi = 2.0 * std::numbers::pi;  // as the CPU's 2.0 * pi * u2 groups it

// NOTE: the CPU's `low + (high - low) * u` and `mean + std * r * c` are contracted to fused
// multiply-adds by GCC (-ffp-contract=fast is its default for C++, and -march=native has
// FMA); writing fma() here gives the same rounding, and nvcc cannot reorder it.
template <class T>
__host__ __device__ __forceinline__ T uniform_value(PhiloxState rng, int64_t i, double low, double high) {
  std::array<uint32_t, 4> words = philox_block(rng, static_cast<uint64_t>(i));
  double unit = std::is_same_v<T, double> ? uniform_double_from_bits(words[0], words[1])
                                          : static_cast<double>(uniform_from_bits(words[0]));
  double value = fma(high - low, unit, low);
  return from_compute<T>(value < high ? value : low);  // rounding must not reach the open end
}

template <class T>
__host__ __device__ __forceinline__ T normal_value(PhiloxState rng, int64_t i, double mean, double std) {
  std::array<uint32_t, 4> words = philox_block(rng, static_cast<uint64_t>(i));
  // Box-Muller on two 53-bit uniforms; 1 - u keeps the logarithm's argument in (0, 1].
  double u1 = 1.0 - uniform_double_from_bits(words[0], words[1]);
  double u2 = uniform_double_from_bits(words[2], words[3]);
  double radius = sqrt(-2.0 * log(u1));
  return from_compute<T>(fma(std * radius, cos(kTwoPi * u2), mean));
}

__global__ void write_two_words_kernel(uint64_t* words, uint64_t first, uint64_t second) {
  words[0] = first;
  words[1] = second;
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    uniform_kernel(T* out, int64_t count, PhiloxState rng, double low, double high) {
  for (int64_t i = global_thread_index(); i < count; i += grid_stride()) out[i] = uniform_value<T>(rng, i, low, high);
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    normal_kernel(T* out, int64_t count, PhiloxState rng, double mean, double std) {
  for (int64_t i = global_thread_index(); i < count; i += grid_stride()) out[i] = normal_value<T>(rng, i, mean, std);
}

// Fills `destination` (any strides) through launch(T*, count) on a contiguous buffer:
// the destination itself, or a temporary copied into it (as the CPU does).
template <class Launch>
void fill_random(const Tensor& destination, const char* op, Launch launch) {
  if (destination.numel() == 0) return;
  Tensor target = destination.is_contiguous() ? destination : empty_like(destination);
  dispatch_floating(destination.dtype(), op, [&]<class HostT>() {
    launch(device_data<HostT>(target), target.numel(), current_stream(target.device()));
  });
  if (!target.is_same(destination)) copy(target, destination);
}

}  // namespace

void copy(const Tensor& source, const Tensor& destination) {
  DeviceGuard guard(destination.device());  // kernels launch on the current device
  if (destination.numel() == 0) return;
  if (source.dtype() == destination.dtype()) {
    if (source.raw_data() == destination.raw_data() && source.strides() == destination.strides()) return;
    if (source.is_contiguous() && destination.is_contiguous()) {
      MG_CUDA_CHECK(cudaMemcpyAsync(destination.raw_data(), source.raw_data(), destination.nbytes(),
                                    cudaMemcpyDeviceToDevice, current_stream(destination.device())));
      return;
    }
    switch (destination.element_size()) {
      case 1: return map1<uint8_t, uint8_t>(source, destination, IdentityElement<uint8_t>{});
      case 2: return map1<uint16_t, uint16_t>(source, destination, IdentityElement<uint16_t>{});
      case 4: return map1<uint32_t, uint32_t>(source, destination, IdentityElement<uint32_t>{});
      case 8: return map1<uint64_t, uint64_t>(source, destination, IdentityElement<uint64_t>{});
      default: MG_ASSERT(false, "unexpected element size ", destination.element_size());
    }
  }
  dispatch_dtype(source.dtype(), [&]<class In>() {
    dispatch_dtype(destination.dtype(), [&]<class Out>() {
      if constexpr (!std::is_same_v<In, Out>) copy_converting<device_t<In>, device_t<Out>>(source, destination);
    });
  });
}

void fill(const Tensor& destination, double value) {
  DeviceGuard guard(destination.device());  // kernels launch on the current device
  if (destination.numel() == 0) return;
  dispatch_dtype(destination.dtype(), [&]<class T>() { fill_typed<T>(destination, value); });
}

void fill_uniform(const Tensor& destination, double low, double high, PhiloxState rng) {
  DeviceGuard guard(destination.device());  // kernels launch on the current device
  fill_random(destination, "uniform_", [&]<class T>(T* out, int64_t count, cudaStream_t stream) {
    LaunchConfig config = launch_config(count);
    uniform_kernel<<<config.blocks, config.threads, 0, stream>>>(out, count, rng, low, high);
    MG_CUDA_CHECK_LAUNCH();
  });
}

void fill_normal(const Tensor& destination, double mean, double std, PhiloxState rng) {
  DeviceGuard guard(destination.device());  // kernels launch on the current device
  fill_random(destination, "normal_", [&]<class T>(T* out, int64_t count, cudaStream_t stream) {
    LaunchConfig config = launch_config(count);
    normal_kernel<<<config.blocks, config.threads, 0, stream>>>(out, count, rng, mean, std);
    MG_CUDA_CHECK_LAUNCH();
  });
}

void write_philox_base(const Tensor& words, PhiloxState base) {
  MG_ASSERT(words.numel() == 2 && words.element_size() == 8 && words.is_contiguous(),
            "write_philox_base needs two contiguous 8-byte words, got ", words.sizes());
  DeviceGuard guard(words.device());  // kernels launch on the current device
  write_two_words_kernel<<<1, 1, 0, current_stream(words.device())>>>(static_cast<uint64_t*>(words.raw_data()),
                                                                      base.seed, base.offset);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace mg::cuda
