// cuda/kernels/channel_map.cuh — the elementwise pass of batch normalisation
// (cuda/kernels/batch_norm.cu): out = element(the channel's coefficients, x, s) over an
// (N, C, ...) tensor dense in NCHW or channels-last order, with per-channel coefficients
// the finishing step of a reduction left on the device (channel_reduce.cuh). What each
// element computes is the caller's Element functor (normalise + affine forward, grad_input
// backward); this file is how the coefficients reach the threads and how the grid walks
// the tensor.
//
// An Element has kCoefficients (how many coefficients per channel it reads, stored as
// coefficients[i * C + c]), kReadsSecond (whether it takes a second tensor s), and
// operator()(const A (&k)[kCoefficients], T x, T s) -> T.
#pragma once

#include <algorithm>
#include <numeric>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/kernels/channel_reduce.cuh"
#include "memgrad/cuda/kernels/dependent_launch.cuh"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda::channel_map {

using channel_reduce::Geometry;
using channel_reduce::load_vector;

// Coefficients i = 0 .. kLoaded - 1 of kVec adjacent channels c, c + 1, ... (the rows
// layout) into k[j][i], in 16-byte loads: the kVec values of one coefficient lie side by
// side (coefficients[i][c + j]), aligned since C % kVec == 0 and c % kVec == 0.
template <int kVec, int kLoaded, class A>
__device__ __forceinline__ void load_adjacent_channels(A (&k)[kVec][kLoaded], const A* coefficients,
                                                       int64_t channels, int64_t c) {
  constexpr int kPiece = kVec * sizeof(A) > 16 ? static_cast<int>(16 / sizeof(A)) : kVec;
#pragma unroll
  for (int i = 0; i < kLoaded; ++i) {
#pragma unroll
    for (int piece = 0; piece < kVec; piece += kPiece) {
      AlignedVector<A, kPiece> values = load_vector<kPiece>(coefficients, i * channels + c + piece);
#pragma unroll
      for (int j = 0; j < kPiece; ++j) k[piece + j][i] = values.value[j];
    }
  }
}

// Vectors a thread loads before it stores any. NOTE: the input and output may be the same
// memory, so the compiler cannot lift one iteration's loads above the last one's store: a
// loop that loads, computes and stores one vector keeps one load in flight per thread.
// Two measured 2-4% faster on ResNet-50's shapes on an H200 (3.5 -> 3.6 TB/s forward at
// 56x56x256, float16); four and eight no faster than two.
inline constexpr int kVectorsInFlight = 2;

// out[i] = element(coefficients of i's channel, x[i], s[i]) over the input's memory, kVec
// elements at a time; s is a second tensor of the input's layout (the gradient backward,
// the residual forward), read only when Element::kReadsSecond. A vector never straddles
// two channels' runs: in the planes layout inner % kVec == 0 (its elements share one
// channel), in the rows layout C % kVec == 0 (its elements are kVec consecutive channels
// of one row).
// kFixedChannels (rows layout, a grid stride that is a multiple of C): every vector a
// thread visits holds the same kVec channels, so their coefficients are loaded once,
// before a loop that only streams. Otherwise they are reloaded when a thread's channel
// changes (planes: a warp's threads share a channel, and the load is a broadcast).
// NOTE: in the rows layout a warp's coefficients are 32 x kVec different channels, so
// loading them costs more L1 traffic than the vectors they serve: with one or two vectors
// per thread (a grid sized to the work) the pass ran at 1.4 TB/s for float16 C = 256..2048
// on an H200 (Nsight Compute, 2026-12-02), against 3 TB/s for C = 64. Hence a grid sized
// to the GPU (launch_channel_map) with many vectors per thread, and 16-byte coefficient
// loads.
template <int kVec, bool kFixedChannels, class T, class A, class Element>
__global__ void __launch_bounds__(kThreadsPerBlock)
    channel_map_kernel(Element element, int64_t total, Geometry geometry, const A* coefficients, const T* input,
                       const T* second, T* output) {
  wait_for_previous_kernel();
  using Vector = AlignedVector<T, kVec>;
  const int64_t vectors = total / kVec;
  const int64_t stride = grid_stride();
  constexpr int kLoaded = Element::kCoefficients;
  A k[kVec][kLoaded];
  int64_t loaded_channel = -1;
  int64_t v = global_thread_index();
  if constexpr (kFixedChannels) {
    if (v < vectors) load_adjacent_channels(k, coefficients, geometry.channels, geometry.channel_at(v * kVec));
  }
  for (; v < vectors; v += kVectorsInFlight * stride) {
    Vector x[kVectorsInFlight];
    Vector s[kVectorsInFlight];  // read only by elements that take a second tensor
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      const int64_t at = v + u * stride;
      if (at >= vectors) break;
      x[u] = reinterpret_cast<const Vector*>(input)[at];
      if constexpr (Element::kReadsSecond) s[u] = reinterpret_cast<const Vector*>(second)[at];
    }
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) {
      const int64_t at = v + u * stride;
      if (at >= vectors) break;
      if constexpr (!kFixedChannels) {
        int64_t c = geometry.channel_at(at * kVec);
        if (c != loaded_channel) {
          if (geometry.rows) {
            load_adjacent_channels(k, coefficients, geometry.channels, c);
          } else {
#pragma unroll
            for (int i = 0; i < kLoaded; ++i) {
              A value = coefficients[i * geometry.channels + c];  // planes: one channel for the whole vector
#pragma unroll
              for (int j = 0; j < kVec; ++j) k[j][i] = value;
            }
          }
          loaded_channel = c;
        }
      }
      Vector y;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        y.value[j] = element(k[j], x[u].value[j], Element::kReadsSecond ? s[u].value[j] : x[u].value[j]);
      }
      reinterpret_cast<Vector*>(output)[at] = y;
    }
  }
}

// How many blocks of kKernel an SM holds at once. Asked once per kernel: the answer
// depends on the GPU's architecture, the same for every device of a process in practice.
template <auto kKernel>
int64_t resident_blocks_per_multiprocessor() {
  static const int64_t blocks = [] {
    int count = 0;
    MG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kKernel, kThreadsPerBlock, 0));
    return std::max<int64_t>(count, 1);
  }();
  return blocks;
}

template <class T, class A, class Element>
void launch_channel_map(Element element, const Geometry& geometry, int64_t total, const A* coefficients,
                        const T* input, const T* second, T* output, Device device, cudaStream_t stream) {
  constexpr int kVec = vector_width_v<T>;
  int64_t run = geometry.rows ? geometry.channels : geometry.inner;
  bool aligned = is_aligned(input, sizeof(T) * kVec) && is_aligned(output, sizeof(T) * kVec) &&
                 (second == nullptr || is_aligned(second, sizeof(T) * kVec));
  int vector = run % kVec == 0 && aligned ? kVec : 1;
  auto launch = [&]<int kWidth>() {
    LaunchConfig config = launch_config(total / kWidth);
    if (geometry.rows) {
      // One wave of resident blocks, each thread looping over many vectors of the same
      // channels; a grid stride (blocks * threads * kWidth elements) that is a multiple of C
      // keeps every thread on them: fewer blocks, by at most C / gcd(C, threads * kWidth) - 1.
      const int64_t wave = multiprocessor_count(device) *
                           resident_blocks_per_multiprocessor<channel_map_kernel<kWidth, true, T, A, Element>>();
      config.blocks = static_cast<unsigned>(std::min<int64_t>(config.blocks, wave));
      int64_t period = geometry.channels / std::gcd(geometry.channels, int64_t{config.threads} * kWidth);
      if (period <= config.blocks) {
        config.blocks = static_cast<unsigned>(config.blocks / period * period);
        launch_dependent(channel_map_kernel<kWidth, true, T, A, Element>, config.blocks, config.threads, 0, stream,
                         device, element, total, geometry, coefficients, input, second, output);
        return;
      }
    }
    launch_dependent(channel_map_kernel<kWidth, false, T, A, Element>, config.blocks, config.threads, 0, stream, device,
                     element, total, geometry, coefficients, input, second, output);
  };
  if (vector == kVec) {
    launch.template operator()<kVec>();
  } else {
    launch.template operator()<1>();
  }
}

}  // namespace mg::cuda::channel_map
