// cuda/cudnn/handle.h — the cuDNN handle a thread uses on a device.
//
// As with cuBLAS, one handle per (thread, device) (cuda/handle_pool.h), created lazily —
// a handle holds per-call state and must not be used by two threads at once — and handed
// to a pool when its thread ends, for the next thread. Each call binds it to the stream
// the work goes to. cuDNN's scratch memory never comes from the handle: every call passes
// a workspace borrowed from the caching allocator (see cuda/cudnn/conv.cpp).
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include "memgrad/core/device.h"

namespace mg::cuda {

// The calling thread's cuDNN handle for `device`, bound to `stream` (cudnnSetStream). The
// current CUDA device must be `device` (see DeviceGuard): cudnnCreate binds to it.
cudnnHandle_t cudnn_handle(Device device, cudaStream_t stream);

}  // namespace mg::cuda
