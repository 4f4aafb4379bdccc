// cuda/transfer.cpp — copies between host and device and between devices (core's
// copy_between_devices hook), and record_stream.
//
// Only dense bytes move: two sides dense in the same layout (row-major, or both
// channels_last) copy their bytes as they are; otherwise a strided side is staged through
// a contiguous copy on its own device first (core's callers mostly pass dense tensors).
#include "memgrad/cuda/transfer.h"

#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/device_error.h"

namespace mg::cuda {

namespace {

// A copy between host memory and a CUDA device, on the device's current stream.
void copy_with_host(const Tensor& host, Device device, void* destination, const void* source,
                    size_t bytes, cudaMemcpyKind kind, bool non_blocking) {
  refuse_during_graph_capture("copying between a CUDA tensor and host memory (item(), to(Device::cpu()), a host "
                        "tensor's to(Device::cuda()))",
                        "copy each batch into the step's static input tensors before replay(), and read "
                        "results (the loss) after it.");
  DeviceGuard guard(device);  // the legacy default stream (nullptr) is the current device's
  cudaStream_t stream = current_stream(device);
  MG_CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, kind, stream));
  if (non_blocking && host.is_pinned()) {
    // The copy may still be running: the pinned block must not be reused before it ends.
    host.storage()->record_stream(reinterpret_cast<StreamId>(stream));
  } else {
    // Pageable memory (or a caller who wants the bytes now): wait, so that the host side
    // may be reused or read as soon as we return.
    MG_CUDA_CHECK(cudaStreamSynchronize(stream));
    check_device_errors(device);  // what kernels found in their data (cuda/device_error.h)
  }
}

// A copy between two CUDA devices. It runs on the source's current stream once the
// destination's current stream has reached this point (its bytes may have been used there
// just before), and the destination's stream waits for it, so work enqueued there next
// sees the bytes. Asynchronous to the host, as in PyTorch.
void copy_between_cuda_devices(const Tensor& source, const Tensor& destination, size_t bytes) {
  const Stream source_stream = Stream::current(source.device());
  const Stream destination_stream = Stream::current(destination.device());
  Event destination_ready;
  destination_ready.record(destination_stream);
  destination_ready.block(source_stream);
  {
    DeviceGuard guard(source.device());
    // Works with or without peer access (without, the driver stages through the host).
    MG_CUDA_CHECK(cudaMemcpyPeerAsync(destination.raw_data(), destination.device().index,
                                      source.raw_data(), source.device().index, bytes,
                                      source_stream.handle()));
  }
  Event copied;
  copied.record(source_stream);
  copied.block(destination_stream);
  // NOTE: destroying the events now is safe: CUDA releases them once their work is done,
  // and the waits were enqueued already.
}

}  // namespace

void copy_between_devices(const Tensor& source, const Tensor& destination, bool non_blocking) {
  MG_ASSERT(source.sizes() == destination.sizes() && source.dtype() == destination.dtype(),
            "copy_between_devices needs equal sizes and dtypes");
  MG_ASSERT(source.device() != destination.device(), "copy_between_devices within ",
            source.device(), ": use the device's copy kernel");
  if (source.numel() == 0) return;
  const bool same_dense_layout = source.strides() == destination.strides() &&
                                 (source.is_contiguous() || is_contiguous_in(source, MemoryFormat::ChannelsLast));
  if (!same_dense_layout && !source.is_contiguous()) {
    copy_between_devices(contiguous_copy(source), destination, non_blocking);
    return;
  }
  if (!same_dense_layout && !destination.is_contiguous()) {
    // NOTE: a host staging tensor is pageable, so this copy waits regardless.
    Tensor staged = empty_like(destination);
    copy_between_devices(source, staged, non_blocking);
    kernels(destination.device()).copy(staged, destination);
    return;
  }

  const size_t bytes = source.nbytes();
  const Device from = source.device();
  const Device to = destination.device();
  if (from.is_cpu() && to.is_cuda()) {
    copy_with_host(source, to, destination.raw_data(), source.raw_data(), bytes,
                   cudaMemcpyHostToDevice, non_blocking);
  } else if (from.is_cuda() && to.is_cpu()) {
    copy_with_host(destination, from, destination.raw_data(), source.raw_data(), bytes,
                   cudaMemcpyDeviceToHost, non_blocking);
  } else if (from.is_cuda() && to.is_cuda()) {
    copy_between_cuda_devices(source, destination, bytes);
  } else {
    MG_CHECK(false, "cannot copy from ", from, " to ", to, ": no CUDA device is involved");
  }
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  MG_CHECK(tensor.defined(), "record_stream: the tensor is undefined");
  MG_CHECK(tensor.device() == stream.device() || tensor.is_pinned(),
           "record_stream: the tensor is on ", tensor.device(), " but the stream on ",
           stream.device(), ". Hint: record a stream of the tensor's own device.");
  tensor.storage()->record_stream(stream.id());
}

}  // namespace mg::cuda
