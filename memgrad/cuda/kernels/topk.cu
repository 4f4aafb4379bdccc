// cuda/kernels/topk.cu — cuda room: the k largest (or smallest) entries of each row of a
// contiguous (rows, n) tensor, sorted as the CPU kernel sorts them (core/kernels.h: larger
// first when largest, equal values by lower index, NaN above every number).
//
// One block per row. Each value is mapped to an unsigned order key whose integer order is
// topk's order (so NaN, -0.0 and the `largest` flag are settled once, not per comparison),
// and entries are compared as (key, position). Rows of up to kSharedCapacity entries are
// sorted whole in shared memory (bitonic). Longer rows (a vocabulary of 50304) first find
// the k-th key by radix selection, 8 bits a pass with a 256-bin histogram (PyTorch's
// approach), then gather the entries above it plus the lowest-positioned ties, and sort
// just those k: in shared memory when k fits, else in place in the indices output.
#include <cub/block/block_scan.cuh>

#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

constexpr int kTopkThreads = 512;
// Positions sorted in shared memory (int32: 16 KiB).
constexpr int64_t kSharedCapacity = 4096;

template <class T> struct OrderKeyOf { using type = uint32_t; };
template <> struct OrderKeyOf<double> { using type = uint64_t; };
template <> struct OrderKeyOf<int64_t> { using type = uint64_t; };
template <class T> using order_key_t = typename OrderKeyOf<T>::type;

// An unsigned integer that is larger exactly when `value` comes earlier in topk's order.
template <class T>
__device__ __forceinline__ order_key_t<T> order_key(T value, bool largest) {
  using Key = order_key_t<T>;
  constexpr Key kSignBit = Key(1) << (sizeof(Key) * 8 - 1);
  Key key;
  if constexpr (is_device_floating_v<T>) {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    F x = to_compute<F>(value);
    if (x != x) {
      key = ~Key(0);  // NaN: above every number
    } else {
      // NOTE: -0.0 == 0.0 to the CPU's comparison, so both become +0.0's key (ties by position).
      if (x == F(0)) x = F(0);
      Key bits;
      if constexpr (sizeof(F) == 8) {
        bits = static_cast<Key>(__double_as_longlong(x));
      } else {
        bits = __float_as_uint(x);
      }
      // IEEE order as unsigned: positive values above negatives, negatives reversed.
      key = (bits & kSignBit) ? ~bits : (bits | kSignBit);
    }
  } else if constexpr (std::is_signed_v<T>) {
    key = static_cast<Key>(value) ^ kSignBit;
  } else {
    key = static_cast<Key>(value);  // uint8, bool
  }
  return largest ? key : ~key;
}

template <class Key>
__device__ __forceinline__ bool comes_first(Key key_a, int64_t position_a, Key key_b, int64_t position_b) {
  return key_a > key_b || (key_a == key_b && position_a < position_b);
}

// Sorts positions[0, count) by (key_at(position), position) with a bitonic network whose
// every comparator puts the earlier entry first (each merge starts by comparing mirrored
// pairs), so the count need not be a power of two: entries past `count` act as the latest
// possible ones and are never touched.
template <class Position, class KeyAt>
__device__ void bitonic_sort(Position* positions, int64_t count, KeyAt key_at) {
  int64_t padded = 1;
  while (padded < count) padded *= 2;
  for (int64_t size = 2; size <= padded; size *= 2) {
    for (int64_t stride = size / 2; stride > 0; stride /= 2) {
      for (int64_t pair = threadIdx.x; pair < padded / 2; pair += blockDim.x) {
        int64_t group_start = (pair / stride) * 2 * stride, offset = pair % stride;
        int64_t first = group_start + offset;
        int64_t second = stride == size / 2 ? group_start + 2 * stride - 1 - offset : first + stride;
        if (second >= count) continue;
        Position a = positions[first], b = positions[second];
        if (comes_first(key_at(b), static_cast<int64_t>(b), key_at(a), static_cast<int64_t>(a))) {
          positions[first] = b;
          positions[second] = a;
        }
      }
      __syncthreads();
    }
  }
}

// The k positions of the row that come first, in any order, into selected[0, k): radix
// selection of the k-th key, then every position above it and the lowest-positioned ties.
template <class Key, class Position, class KeyAt>
__device__ void select_first_k(int64_t n, int64_t k, KeyAt key_at, Position* selected) {
  using BlockScan = cub::BlockScan<int, kTopkThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ unsigned int histogram[256];
  __shared__ Key threshold;       // the digits of the k-th key found so far
  __shared__ Key threshold_mask;  // which digits those are
  __shared__ int64_t needed;      // how many of the entries matching threshold are still to take
  __shared__ unsigned int above_count;
  if (threadIdx.x == 0) {
    threshold = 0;
    threshold_mask = 0;
    needed = k;
    above_count = 0;
  }
  for (int shift = static_cast<int>(sizeof(Key)) * 8 - 8; shift >= 0; shift -= 8) {
    for (int bin = threadIdx.x; bin < 256; bin += blockDim.x) histogram[bin] = 0;
    __syncthreads();
    Key prefix = threshold, mask = threshold_mask;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      Key key = key_at(i);
      if ((key & mask) == prefix) {
        // NOTE: lanes holding the same digit add once: a row of similar values (logits)
        // puts most entries in a few bins, and same-address atomics serialise.
        unsigned int digit = static_cast<unsigned int>(key >> shift) & 0xFF;
        unsigned int peers = __match_any_sync(__activemask(), digit);
        if (static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) {
          atomicAdd(&histogram[digit], static_cast<unsigned int>(__popc(peers)));
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The digit the k-th entry has: walk the bins from the top until they hold `needed`.
      int64_t above = 0;
      for (int digit = 255; digit >= 0; --digit) {
        if (above + histogram[digit] >= needed) {
          threshold |= static_cast<Key>(digit) << shift;
          threshold_mask |= static_cast<Key>(0xFF) << shift;
          needed -= above;
          break;
        }
        above += histogram[digit];
      }
    }
    __syncthreads();
  }
  // Now threshold is the k-th key: the k - needed entries above it, in any order ...
  Key kth = threshold;
  int64_t ties = needed;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (key_at(i) > kth) selected[atomicAdd(&above_count, 1u)] = static_cast<Position>(i);
  }
  // ... then the first `ties` entries equal to it, by position (tile by tile, in order).
  int64_t taken = 0;
  for (int64_t tile = 0; tile < n && taken < ties; tile += blockDim.x) {
    int64_t i = tile + threadIdx.x;
    int is_tie = i < n && key_at(i) == kth ? 1 : 0;
    int rank, tile_ties;
    BlockScan(scan_storage).ExclusiveSum(is_tie, rank, tile_ties);
    if (is_tie && taken + rank < ties) selected[k - ties + taken + rank] = static_cast<Position>(i);
    taken += tile_ties;
    __syncthreads();  // scan_storage is reused by the next tile
  }
  __syncthreads();
}

template <class T>
__global__ void __launch_bounds__(kTopkThreads)
    topk_kernel(const T* input, int64_t n, int64_t k, bool largest, T* values, int64_t* indices) {
  using Key = order_key_t<T>;
  __shared__ int32_t shared_positions[kSharedCapacity];
  const T* row_input = input + static_cast<int64_t>(blockIdx.x) * n;
  T* row_values = values + static_cast<int64_t>(blockIdx.x) * k;
  int64_t* row_indices = indices + static_cast<int64_t>(blockIdx.x) * k;
  auto key_at = [row_input, largest](int64_t position) { return order_key(row_input[position], largest); };

  auto write_first_k = [&](const auto* sorted) {
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      int64_t position = sorted[j];
      row_indices[j] = position;
      row_values[j] = row_input[position];
    }
  };
  if (n <= kSharedCapacity) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) shared_positions[i] = static_cast<int32_t>(i);
    __syncthreads();
    bitonic_sort(shared_positions, n, key_at);
    write_first_k(shared_positions);
  } else if (k <= kSharedCapacity) {
    select_first_k<Key>(n, k, key_at, shared_positions);
    bitonic_sort(shared_positions, k, key_at);
    write_first_k(shared_positions);
  } else {
    // NOTE: too many to hold in shared memory: the indices output is the sort's buffer
    // (global memory; __syncthreads orders a block's global accesses too).
    select_first_k<Key>(n, k, key_at, row_indices);
    bitonic_sort(row_indices, k, key_at);
    write_first_k(row_indices);
  }
}

}  // namespace

void topk(const Tensor& input, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  DeviceGuard guard(input.device());  // kernels launch on the current device
  MG_ASSERT(input.is_contiguous() && values.is_contiguous() && indices.is_contiguous(),
            "topk expects contiguous tensors");
  const int64_t n = input.dim() == 0 ? 1 : input.sizes().back();
  const int64_t rows = n == 0 ? 0 : input.numel() / n;
  if (rows == 0 || k == 0) return;
  MG_CHECK(n <= INT32_MAX, "topk: rows of ", n, " entries are longer than the CUDA kernel takes (2^31 - 1). "
           "Hint: split the row, or run topk on the CPU.");
  MG_CHECK(rows <= INT32_MAX, "topk: ", rows, " rows are more than the CUDA kernel takes (2^31 - 1)");
  dispatch_dtype(input.dtype(), [&]<class HostT>() {
    topk_kernel<<<static_cast<unsigned>(rows), kTopkThreads, 0, current_stream(input.device())>>>(
        device_data<HostT>(input), n, k, largest, device_data<HostT>(values), indices.data_ptr<int64_t>());
    MG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mg::cuda
