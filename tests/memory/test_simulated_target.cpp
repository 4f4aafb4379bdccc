// tests/memory/test_simulated_target.cpp — the simulated device standing in for a real one
// (memory/simulated_target.h): for the CPU its kernels borrow exactly the scratch the CPU
// kernels borrow (same peak above the operands, same categories) in float32, bfloat16
// and channels_last; for CUDA they keep cuBLAS's workspace until the target ends and
// borrow batch norm's partial sums per call; one target at a time, and never a simulated one.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/core/storage.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/cuda.h"

namespace {

using mg::Device;
using mg::DType;
using mg::MemoryCategory;
using mg::Tensor;

// A simulated device of its own, so other tests' allocations never mix in.
const Device kSimulated = Device::simulated(7);

struct Borrowed {
  int64_t peak_allocated = 0;  // above what was allocated before the call
  int64_t peak_workspace = 0;
  int64_t peak_temporary = 0;
};

// What `call` borrowed on `device` beyond the tensors alive before it.
Borrowed borrowed_by(Device device, const std::function<void()>& call) {
  const mg::memory::Snapshot before = mg::memory::snapshot(device);
  mg::memory::reset_peak_stats(device);
  call();
  const mg::memory::Snapshot after = mg::memory::snapshot(device);
  CHECK(after.allocated_bytes == before.allocated_bytes);  // all returned
  return {after.peak_allocated_bytes - before.allocated_bytes,
          after.category(MemoryCategory::Workspace).peak - before.category(MemoryCategory::Workspace).current,
          after.category(MemoryCategory::Temporary).peak - before.category(MemoryCategory::Temporary).current};
}

// The three convolution entries on (N, C, H, W) = (3, 4, 9, 9) with a 3x3 weight, stride 2,
// padding 1, in `dtype` and `layout`, on `device`.
Borrowed convolution_scratch(Device device, DType dtype, mg::MemoryFormat layout) {
  const mg::TensorOptions options{.dtype = dtype, .device = device};
  const Tensor input = mg::empty({3, 4, 9, 9}, options, layout);
  const Tensor weight = mg::empty({6, 4, 3, 3}, options, layout);
  const Tensor bias = mg::empty({6}, options);
  const Tensor output = mg::empty({3, 6, 5, 5}, options, layout);
  mg::Window2d window;
  window.stride_h = window.stride_w = 2;
  window.pad_h = window.pad_w = 1;
  if (device.is_cpu()) {  // real kernels read their inputs: give them values
    mg::kernels(device).fill(input, 0.5);
    mg::kernels(device).fill(weight, 0.25);
    mg::kernels(device).fill(bias, 1.0);
    mg::kernels(device).fill(output, 0.0);
  }
  const mg::KernelTable& table = mg::kernels(device);
  return borrowed_by(device, [&] {
    table.conv2d(input, weight, bias, window, output);
    table.conv2d_backward_input(output, weight, window, input, /*accumulate=*/false);
    table.conv2d_backward_input(output, weight, window, input, /*accumulate=*/true);
    table.conv2d_backward_weight(output, input, window, weight);
  });
}

}  // namespace

TEST_CASE("standing in for the CPU, simulated convolutions borrow what the CPU's do", "[core][simulated]") {
  const auto [dtype, layout] = GENERATE(std::pair{DType::Float32, mg::MemoryFormat::Contiguous},
                                        std::pair{DType::BFloat16, mg::MemoryFormat::Contiguous},
                                        std::pair{DType::Float32, mg::MemoryFormat::ChannelsLast});
  INFO(dtype << (layout == mg::MemoryFormat::ChannelsLast ? " channels_last" : " NCHW"));
  const Borrowed real = convolution_scratch(Device::cpu(), dtype, layout);
  Borrowed simulated;
  {
    const mg::SimulatedTarget cpu(Device::cpu(), kSimulated, size_t{1} << 30);
    simulated = convolution_scratch(kSimulated, dtype, layout);
  }
  CHECK(real.peak_workspace > 0);  // the im2col column buffers
  CHECK(simulated.peak_allocated == real.peak_allocated);
  CHECK(simulated.peak_workspace == real.peak_workspace);
  CHECK(simulated.peak_temporary == real.peak_temporary);
  // Without a target, the simulated kernels borrow nothing.
  CHECK(convolution_scratch(kSimulated, dtype, layout).peak_allocated == 0);
}

TEST_CASE("standing in for the CPU, simulated 16-bit products and reductions borrow what the CPU's do",
          "[core][simulated]") {
  auto scratch = [](Device device) {
    const mg::TensorOptions options{.dtype = DType::BFloat16, .device = device};
    const Tensor a = mg::zeros({1, 64, 32}, options), b = mg::zeros({1, 32, 48}, options);
    const Tensor product = mg::empty({1, 64, 48}, options);
    const Tensor sums = mg::empty({1, 1, 48}, options);
    return borrowed_by(device, [&] {
      mg::kernels(device).matmul(a, b, product);
      mg::kernels(device).reduce(mg::ReduceOp::Sum, product, sums);
    });
  };
  const Borrowed real = scratch(Device::cpu());
  const mg::SimulatedTarget cpu(Device::cpu(), kSimulated, size_t{1} << 30);
  const Borrowed simulated = scratch(kSimulated);
  CHECK(real.peak_temporary > 0);  // float32 copies of the operands and the result
  CHECK(simulated.peak_allocated == real.peak_allocated);
  CHECK(simulated.peak_temporary == real.peak_temporary);
}

TEST_CASE("standing in for a GPU, the simulated device keeps cuBLAS's workspace until the target ends",
          "[core][simulated]") {
  const mg::TensorOptions options{.device = kSimulated};
  {
    const mg::SimulatedTarget gpu(Device::cuda(), kSimulated, size_t{1} << 30);
    const Tensor a = mg::empty({1, 8, 8}, options), b = mg::empty({1, 8, 8}, options);
    const Tensor c = mg::empty({1, 8, 8}, options);
    mg::kernels(kSimulated).matmul(a, b, c);
    mg::kernels(kSimulated).matmul(a, b, c);  // one workspace per process, not per call
    CHECK(mg::memory::snapshot(kSimulated).category(MemoryCategory::Workspace).current == int64_t{32} << 20);
    CHECK_THAT(gpu.describe(), Catch::Contains("cuBLAS"));
  }
  CHECK(mg::memory::snapshot(kSimulated).category(MemoryCategory::Workspace).current == 0);
}

TEST_CASE("standing in for a GPU, simulated batch norm borrows coefficients and partial sums per call",
          "[core][simulated]") {
  const mg::SimulatedTarget gpu(Device::cuda(), kSimulated, size_t{1} << 30);
  const mg::TensorOptions options{.device = kSimulated};
  const Tensor input = mg::empty({8, 16, 32, 32}, options), output = mg::empty({8, 16, 32, 32}, options);
  const Tensor channel = mg::empty({16}, options);
  const Borrowed borrowed = borrowed_by(kSimulated, [&] {
    mg::kernels(kSimulated).batch_norm(input, channel, channel, channel, channel, /*num_batches_tracked=*/Tensor(),
                                       /*training=*/true, 0.1, 1e-5, /*relu=*/false, /*residual=*/Tensor(),
                                       /*statistics=*/{}, output, channel, channel);
  });
  // 8 x 32 x 32 = 8192 values per channel in chunks of at least 256 x 8: 4 chunks, so
  // (5 + 2 x 4) x 16 float32 values, rounded to the allocator's 512 bytes.
  CHECK(borrowed.peak_workspace == (5 + 2 * 4) * 16 * 4);
  CHECK(borrowed.peak_allocated == 1024);
}

// Where no GPU answers (CI); with one, cuDNN is asked instead, and scripts/gpu-check's
// predict stage checks its bytes.
TEST_CASE("standing in for a GPU without one, convolutions borrow the estimated cuDNN workspace",
          "[core][simulated]") {
  if (mg::cuda::is_available()) {
    WARN("a GPU is present: cuDNN is asked, not estimated (scripts/gpu-check's predict stage checks it)");
    return;
  }
  const mg::SimulatedTarget gpu(Device::cuda(), kSimulated, size_t{1} << 30);
  const mg::TensorOptions options{.dtype = DType::Float16, .device = kSimulated};
  const auto one_call = [&](mg::MemoryFormat layout, int64_t channels, bool weight_gradient) {
    const Tensor input = mg::empty({8, channels, 16, 16}, options, layout);
    const Tensor weight = mg::empty({32, channels, 3, 3}, options, layout);
    const Tensor output = mg::empty({8, 32, 16, 16}, options, layout);
    mg::Window2d window;
    window.pad_h = window.pad_w = 1;
    return borrowed_by(kSimulated, [&] {
      if (weight_gradient) {
        mg::kernels(kSimulated).conv2d_backward_weight(output, input, window, weight);
      } else {
        mg::kernels(kSimulated).conv2d(input, weight, Tensor(), window, output);
      }
    }).peak_workspace;
  };
  // NCHW: the operands transposed, input + weight + output (2 bytes each; requested bytes).
  const int64_t nchw = 2 * (8 * 16 * 16 * 16 + 32 * 16 * 9 + 8 * 32 * 16 * 16);
  CHECK(one_call(mg::MemoryFormat::Contiguous, 16, false) == nchw);
  // channels_last, 16 channels (a multiple of 8 float16 values): nothing for forward, a
  // third of the operands for the weight gradient.
  CHECK(one_call(mg::MemoryFormat::ChannelsLast, 16, false) == 0);
  CHECK(one_call(mg::MemoryFormat::ChannelsLast, 16, true) == nchw / 3);
  // channels_last with 3 input channels pads and transposes as NCHW does.
  const int64_t stem = 2 * (8 * 3 * 16 * 16 + 32 * 3 * 9 + 8 * 32 * 16 * 16);
  CHECK(one_call(mg::MemoryFormat::ChannelsLast, 3, false) == stem);
  CHECK_THAT(gpu.describe(), Catch::Contains("ESTIMATED"));
}

TEST_CASE("the simulated device stands in for one real device at a time", "[core][simulated]") {
  CHECK_THROWS_WITH(mg::SimulatedTarget(Device::simulated(), kSimulated, 1 << 20),
                    Catch::Contains("a target is a real device"));
  CHECK_THROWS_WITH(mg::SimulatedTarget(Device::cpu(), Device::cpu(), 1 << 20),
                    Catch::Contains("is not a simulated device"));
  const mg::SimulatedTarget cpu(Device::cpu(), kSimulated, 1 << 20);
  CHECK_THROWS_WITH(mg::SimulatedTarget(Device::cuda(), Device::simulated(6), 1 << 20),
                    Catch::Contains("one device at a time"));
  CHECK(cpu.target() == Device::cpu());
}

TEST_CASE("a simulated device places segments as its target's backend does", "[core][simulated]") {
  auto two_segment_addresses = [](Device target) {
    const mg::SimulatedTarget standing_in(target, kSimulated, size_t{1} << 30);
    const mg::TensorOptions options{.dtype = DType::UInt8, .device = kSimulated};
    const Tensor first = mg::empty({int64_t{30} << 20}, options), second = mg::empty({int64_t{30} << 20}, options);
    return std::pair{reinterpret_cast<uintptr_t>(first.storage()->data()),
                     reinterpret_cast<uintptr_t>(second.storage()->data())};
  };
  // The host's malloc maps large blocks below the previous ones; cudaMalloc above.
  const auto [cpu_first, cpu_second] = two_segment_addresses(Device::cpu());
  CHECK(cpu_second < cpu_first);
  const auto [gpu_first, gpu_second] = two_segment_addresses(Device::cuda());
  CHECK(gpu_second > gpu_first);
}
