// cuda/cuda_allocator_backend.cpp — cudaMalloc/cudaFree behind the caching allocator, the
// memory fraction, the allocator events, and make_allocator_backend for core's registry.
#include "memgrad/cuda/cuda_allocator_backend.h"

#include <memory>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/nvml.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

namespace {

CudaAllocatorBackend& backend_of(Device device) {
  MG_CHECK(device.is_cuda(), "the memory fraction applies to CUDA devices, not to ", device);
  auto* backend = dynamic_cast<CudaAllocatorBackend*>(&allocator_for(device).backend());
  MG_ASSERT(backend != nullptr, "the allocator of ", device, " has no CUDA backend");
  return *backend;
}

}  // namespace

CudaAllocatorBackend::CudaAllocatorBackend(Device device) : device_(device) {
  DeviceGuard guard(device);  // checks that the device exists
  size_t free_bytes = 0;
  MG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes_));
}

void* CudaAllocatorBackend::allocate(size_t bytes) {
  // NOTE: the check and the add are not one atomic step; only the allocator's lock holder
  // allocates, so no two threads race here.
  if (used_bytes() + bytes > capacity()) return nullptr;
  DeviceGuard guard(device_);
  void* ptr = nullptr;
  // NOTE: while this thread captures a CUDA graph (cuda/captured_step.h), cudaMalloc counts
  // as potentially unsafe and would fail the capture; the graph's private pool needs new
  // segments then, and cudaMalloc enqueues nothing on the captured stream, so the call runs
  // in relaxed capture mode, as PyTorch's allocator does.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool capturing = graph_capture_underway();
  if (capturing) MG_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (capturing) MG_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));  // the capture's own mode again
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it, so the next check reports its own problem
    return nullptr;
  }
  MG_CUDA_CHECK(status);
  used_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return ptr;
}

void CudaAllocatorBackend::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  DeviceGuard guard(device_);
  MG_CUDA_CHECK(cudaFree(ptr));
  used_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

size_t CudaAllocatorBackend::capacity() const {
  return static_cast<size_t>(static_cast<double>(total_bytes_) * memory_fraction());
}

std::string CudaAllocatorBackend::describe_memory() const {
  // NOTE: this text goes into the out-of-memory message, so a failing query is reported
  // inside it rather than thrown over it.
  std::string text = device_.str() + ": ";
  try {
    DeviceGuard guard(device_);
    size_t free_bytes = 0, total_bytes = 0;
    MG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    text += format_bytes(static_cast<int64_t>(free_bytes)) + " free of " +
            format_bytes(static_cast<int64_t>(total_bytes)) + " (cudaMemGetInfo)";
  } catch (const Error& error) {
    text += std::string("cudaMemGetInfo failed: ") + error.what();
  }
  const double fraction = memory_fraction();
  if (fraction < 1.0) {
    text += "; memgrad may hold " + std::to_string(static_cast<int>(fraction * 100 + 0.5)) +
            "% of it, " + format_bytes(static_cast<int64_t>(capacity())) +
            " (set_memory_fraction), and holds " +
            format_bytes(static_cast<int64_t>(used_bytes()));
  }
  text += "; " + describe_nvml_memory(device_.index);
  return text;
}

void* CudaAllocatorBackend::record_event(StreamId stream) {
  return record_allocator_event(stream, device_.index);
}
bool CudaAllocatorBackend::event_done(void* event) { return allocator_event_done(event); }
void CudaAllocatorBackend::synchronize_event(void* event) { synchronize_allocator_event(event); }
void CudaAllocatorBackend::destroy_event(void* event) { destroy_allocator_event(event); }

void CudaAllocatorBackend::set_memory_fraction(double fraction) {
  MG_CHECK(fraction > 0.0 && fraction <= 1.0, "set_memory_fraction(", fraction, ") on ", device_,
           ": the fraction must lie in (0, 1]. Hint: 0.5 lets memgrad hold half of the "
           "device's memory; 1 (the default) all of it.");
  fraction_.store(fraction, std::memory_order_relaxed);
}

void set_memory_fraction(double fraction, Device device) {
  backend_of(device).set_memory_fraction(fraction);
}

double memory_fraction(Device device) { return backend_of(device).memory_fraction(); }

// ---- allocator events ----

// NOTE: events are created per free of a block that other streams used, not pooled:
// cudaEventCreate costs about a microsecond, and such frees are rare (record_stream, and
// non-blocking copies from pinned memory).
void* record_allocator_event(StreamId stream, int device) {
  const auto handle = reinterpret_cast<cudaStream_t>(stream);
  DeviceGuard guard(Device::cuda(device));  // the event must be made on the stream's device
  cudaEvent_t event = nullptr;
  MG_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t status = cudaEventRecord(event, handle);
  if (status != cudaSuccess) {
    (void)cudaEventDestroy(event);
    MG_CUDA_CHECK(status);
  }
  return static_cast<void*>(event);
}

bool allocator_event_done(void* event) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  MG_CUDA_CHECK(status);
  return true;
}

void synchronize_allocator_event(void* event) {
  MG_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void destroy_allocator_event(void* event) noexcept {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

// ---- core's hook ----

std::unique_ptr<RawBackend> make_allocator_backend(Device device) {
  return std::make_unique<CudaAllocatorBackend>(device);
}

}  // namespace mg::cuda
