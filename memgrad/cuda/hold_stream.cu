// cuda/hold_stream.cu — the spinning kernel of cuda/hold_stream.h.
#include "memgrad/cuda/hold_stream.h"

#include "memgrad/cuda/check.h"

namespace mg::cuda {

namespace {

__device__ __forceinline__ uint64_t global_nanoseconds() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void hold_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_nanoseconds();
  while (global_nanoseconds() - start < nanoseconds) __nanosleep(1000);
}

}  // namespace

void hold_stream(const Stream& stream, int microseconds) {
  DeviceGuard guard(stream.device());
  hold_kernel<<<1, 1, 0, stream.handle()>>>(static_cast<uint64_t>(microseconds) * 1000);
  MG_CUDA_CHECK_LAUNCH();
}

}  // namespace mg::cuda
