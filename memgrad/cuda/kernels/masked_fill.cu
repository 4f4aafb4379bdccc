// cuda/kernels/masked_fill.cu — cuda room: output = mask ? value : input, input and bool
// mask any strided (or broadcast, stride-0) views of the contiguous output's sizes; the
// elementwise map of strided_indexer.cuh (vector loads when everything is dense).
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/cuda/kernels/strided_indexer.cuh"

namespace mg::cuda {

namespace {

template <class T>
struct MaskedFillElement {
  T value;
  __device__ T operator()(T x, bool masked) const { return masked ? value : x; }
};

}  // namespace

void masked_fill(const Tensor& input, const Tensor& mask, double value, const Tensor& output) {
  DeviceGuard guard(output.device());  // kernels launch on the current device
  dispatch_dtype(input.dtype(), [&]<class HostT>() {
    using T = device_t<HostT>;
    // NOTE: the value is converted on the host as the CPU kernel converts it, so both fill
    // the same bits (-inf stays -inf in 16-bit types).
    T fill_value = to_device_value(convert_value<HostT>(value));
    // Integer and bool tensors are rare here: the strided kernel only (less to compile).
    map2<T, T, bool, is_device_floating_v<T>>(input, mask, output, MaskedFillElement<T>{fill_value});
  });
}

}  // namespace mg::cuda
