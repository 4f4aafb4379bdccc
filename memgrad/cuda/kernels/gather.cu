// cuda/kernels/gather.cu — CUDA gather (and so index_select) and its gradient, scatter_add.
//
// A thread per position of the index, located by a StridedIndexer over three operands:
// the gathered (or scattered) tensor, the index, and the other tensor seen with stride 0
// along `dim` (the start of the fibre the index picks from), as core/cpu/gather.cpp walks
// them. gather only moves elements, so it copies their bits (one kernel per element size,
// not per dtype). An index outside [0, size) is not followed: gather writes a zero there
// and records the error (cuda/device_error.h), raised at the next synchronisation, so no
// host check and no wait are needed.
//
// scatter_add adds with atomicAdd into a float32 or float64 destination (16-bit gradients
// are summed in float32 by contract: a 16-bit atomicAdd would round after every add). The
// order of the adds varies from run to run, so on CUDA the sum is not bitwise
// deterministic (the CPU's is), as embedding_backward's.
#include <cstdint>

#include "memgrad/core/determinism.h"
#include "memgrad/core/error.h"
#include "memgrad/cuda/device_error.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

// Element strides of `tensor`, but 0 along `dim`.
Shape fibre_strides(const Tensor& tensor, int dim) {
  Shape strides = tensor.strides();
  strides[dim] = 0;
  return strides;
}

// Operands {walked, index, fibre start of `other`} over the index's positions (row-major,
// so the linear index is the flat position an error reports).
StridedIndexer<3> index_indexer(const Tensor& walked, const Tensor& index, const Tensor& other, int dim) {
  return make_strided_indexer<3>(index.sizes(),
                                 std::array<Shape, 3>{walked.strides(), index.strides(), fibre_strides(other, dim)});
}

// Bits is an unsigned integer of the element's size.
template <class Bits>
__global__ void gather_kernel(StridedIndexer<3> indexer, const Bits* input, int64_t dim_size, int64_t dim_stride,
                              const int64_t* index, Bits* output, int dim, DeviceErrorRecord* errors) {
  for (int64_t i = global_thread_index(); i < indexer.numel; i += grid_stride()) {
    Offsets<3> at = indexer.offsets(i);
    const int64_t picked = index[at[1]];
    if (picked >= 0 && picked < dim_size) {
      output[at[0]] = input[at[2] + picked * dim_stride];
    } else {
      output[at[0]] = Bits(0);  // the bits of 0 in every dtype
      report_device_error(errors, DeviceErrorCode::GatherIndexOutOfRange, picked, dim_size, i, dim);
    }
  }
}

// T: the source's device type; Sum: float or double.
template <class T, class Sum>
__global__ void scatter_add_kernel(StridedIndexer<3> indexer, const T* source, const int64_t* index, Sum* destination,
                                   int64_t dim_size, int64_t dim_stride) {
  for (int64_t i = global_thread_index(); i < indexer.numel; i += grid_stride()) {
    Offsets<3> at = indexer.offsets(i);
    const int64_t picked = index[at[1]];
    if (picked < 0 || picked >= dim_size) continue;  // reported by the forward's gather
    atomicAdd(destination + at[2] + picked * dim_stride, to_compute<Sum>(source[at[0]]));
  }
}

template <class Bits>
void launch_gather(const Tensor& input, int dim, const Tensor& index, const Tensor& output) {
  StridedIndexer<3> indexer = index_indexer(output, index, input, dim);
  LaunchConfig config = launch_config(indexer.numel);
  gather_kernel<<<config.blocks, config.threads, 0, current_stream(output.device())>>>(
      indexer, static_cast<const Bits*>(input.raw_data()), input.sizes()[dim], input.strides()[dim],
      index.data_ptr<int64_t>(), static_cast<Bits*>(output.raw_data()), dim, device_error_record(output.device()));
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gather(const Tensor& input, int dim, const Tensor& index, const Tensor& output) {
  if (output.numel() == 0) return;
  DeviceGuard guard(output.device());
  switch (input.element_size()) {
    case 1: return launch_gather<uint8_t>(input, dim, index, output);
    case 2: return launch_gather<uint16_t>(input, dim, index, output);
    case 4: return launch_gather<uint32_t>(input, dim, index, output);
    case 8: return launch_gather<uint64_t>(input, dim, index, output);
  }
  MG_ASSERT(false, "gather: no kernel for elements of ", input.element_size(), " bytes");
}

void scatter_add(const Tensor& source, int dim, const Tensor& index, const Tensor& destination) {
  if (source.numel() == 0) return;
  MG_CHECK(!deterministic_algorithms(), "scatter_add on ", destination.device().str(),
           " (also the backward of gather and index_select) adds with float atomics in an order that varies, "
           "and has no deterministic form yet; set_deterministic_algorithms(true) forbids it. Hint: run this op "
           "on the CPU, or turn deterministic algorithms off for it.");
  Device device = destination.device();
  DeviceGuard guard(device);
  StridedIndexer<3> indexer = index_indexer(source, index, destination, dim);
  LaunchConfig config = launch_config(indexer.numel);
  cudaStream_t stream = current_stream(device);
  const int64_t dim_size = destination.sizes()[dim], dim_stride = destination.strides()[dim];
  dispatch_floating(source.dtype(), "scatter_add", [&]<class Element>() {
    using T = device_t<Element>;
    const T* values = device_data<Element>(source);
    if (destination.dtype() == DType::Float64) {
      scatter_add_kernel<<<config.blocks, config.threads, 0, stream>>>(
          indexer, values, index.data_ptr<int64_t>(), destination.data_ptr<double>(), dim_size, dim_stride);
    } else {
      scatter_add_kernel<<<config.blocks, config.threads, 0, stream>>>(
          indexer, values, index.data_ptr<int64_t>(), destination.data_ptr<float>(), dim_size, dim_stride);
    }
    MG_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mg::cuda
