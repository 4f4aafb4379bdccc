// tests/cuda/test_cuda_stream_reuse.cpp — the hazard of a destroyed stream's handle: CUDA
// may give it to the next stream created, and the caching allocator keys cached blocks by
// the handle, so the new stream could take a block the old stream's queued work still
// writes. mg::cuda::Stream's destructor waits for its work (cuda/runtime.cpp), so by the
// time the handle can be reused the old work is done: the new stream's writes are the last.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"

namespace {

using mg::Device;
using mg::Tensor;

constexpr size_t kBytes = size_t{1} << 20;

// Keeps the old stream's later work queued for a while: a host function that sleeps.
void CUDART_CB sleep_300_ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

}  // namespace

TEST_CASE("a destroyed stream's queued work is done before a new stream can take its cached blocks", "[cuda]") {
  mg::allocator_for(Device::cuda()).empty_cache();
  auto old_stream = std::make_unique<mg::cuda::Stream>();
  const mg::StreamId old_id = old_stream->id();
  void* old_address = nullptr;
  mg::cuda::Event written;
  {
    mg::cuda::StreamGuard use(*old_stream);
    Tensor block = mg::empty({static_cast<int64_t>(kBytes)}, {.dtype = mg::DType::UInt8, .device = Device::cuda()});
    old_address = block.raw_data();
    MG_CUDA_CHECK(cudaLaunchHostFunc(old_stream->handle(), &sleep_300_ms, nullptr));
    MG_CUDA_CHECK(cudaMemsetAsync(old_address, 0x3f, kBytes, old_stream->handle()));
    written.record(*old_stream);
  }  // the block is free and cached for the old handle while the memset is still queued

  const auto before = std::chrono::steady_clock::now();
  old_stream.reset();
  const auto waited = std::chrono::steady_clock::now() - before;
  CHECK(written.query());  // the destructor waited for the old stream's work
  CHECK(waited >= std::chrono::milliseconds(100));

  // A new stream; when CUDA hands it the old handle, it takes the old block. Either way its
  // own writes must be what the block holds afterwards.
  mg::cuda::Stream fresh;
  mg::cuda::StreamGuard use(fresh);
  Tensor next = mg::empty({static_cast<int64_t>(kBytes)}, {.dtype = mg::DType::UInt8, .device = Device::cuda()});
  if (fresh.id() == old_id) CHECK(next.raw_data() == old_address);
  MG_CUDA_CHECK(cudaMemsetAsync(next.raw_data(), 0, kBytes, fresh.handle()));
  fresh.synchronize();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past any stray write of the old stream
  std::vector<unsigned char> host(kBytes, 1);
  MG_CUDA_CHECK(cudaMemcpy(host.data(), next.raw_data(), kBytes, cudaMemcpyDeviceToHost));
  size_t nonzero = 0;
  for (unsigned char byte : host) nonzero += byte != 0 ? 1 : 0;
  CHECK(nonzero == 0);
}
