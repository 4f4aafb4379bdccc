// cuda/cudnn/handle.cpp — per-thread cuDNN handles (see the header).
#include "memgrad/cuda/cudnn/handle.h"

#include "memgrad/cuda/cudnn/check.h"
#include "memgrad/cuda/handle_pool.h"

namespace mg::cuda {

cudnnHandle_t cudnn_handle(Device device, cudaStream_t stream) {
  cudnnHandle_t handle = thread_handle<cudnnHandle_t>(device, "cuDNN", [] {
    cudnnHandle_t created = nullptr;
    MG_CUDNN_CHECK(cudnnCreate(&created));
    return created;
  });
  MG_CUDNN_CHECK(cudnnSetStream(handle, stream));
  return handle;
}

}  // namespace mg::cuda
