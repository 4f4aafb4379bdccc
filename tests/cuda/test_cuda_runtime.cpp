// tests/cuda/test_cuda_runtime.cpp — devices, streams, events, the current stream, and
// copies between host and device, on a real GPU.
//
// Copies are checked by round trips of fresh random values (never zeros), compared
// bit for bit with the original.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/tensor.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/hold_stream.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/stream_hold.h"
#include "memgrad/cuda/transfer.h"

namespace {

using mg_test::StreamHold;

using mg::Device;
using mg::DType;
using mg::Tensor;

// The bytes of a CPU tensor, for exact comparison.
std::vector<unsigned char> host_bytes(const Tensor& tensor) {
  REQUIRE(tensor.device().is_cpu());
  const Tensor contiguous = mg::contiguous_copy(tensor);
  const auto* data = static_cast<const unsigned char*>(contiguous.raw_data());
  return std::vector<unsigned char>(data, data + contiguous.nbytes());
}

// Random values of `dtype` on the CPU, none of them zero.
Tensor random_host(DType dtype, const mg::Shape& sizes) {
  if (dtype == DType::Int64) return mg::randint(1, 1'000'000'000, sizes, {.dtype = DType::Int64});
  // rand is in [0, 1): shift to [0.5, 1.5) so no value is zero, also after rounding to half.
  std::vector<double> doubles = mg::rand(sizes, {.dtype = DType::Float64}).to_vector<double>();
  for (double& value : doubles) value += 0.5;
  return mg::converted_copy(mg::from_vector(doubles, sizes), dtype, Device::cpu());
}

}  // namespace

TEST_CASE("a CUDA device is visible", "[cuda]") {
  CHECK(mg::cuda::device_count() > 0);
  CHECK(mg::cuda::is_available());
  CHECK_THROWS_WITH(mg::cuda::current_stream(Device::cuda(mg::cuda::device_count())),
                    Catch::Contains("does not exist"));
  CHECK_THROWS_AS(mg::cuda::Stream(Device::cpu()), mg::Error);
}

TEST_CASE("DeviceGuard sets the device and restores it", "[cuda]") {
  int before = -1;
  MG_CUDA_CHECK(cudaGetDevice(&before));
  const int last = mg::cuda::device_count() - 1;
  {
    mg::cuda::DeviceGuard guard(Device::cuda(last));
    int inside = -1;
    MG_CUDA_CHECK(cudaGetDevice(&inside));
    CHECK(inside == last);
  }
  int after = -1;
  MG_CUDA_CHECK(cudaGetDevice(&after));
  CHECK(after == before);
  mg::cuda::synchronize(Device::cuda());
}

TEST_CASE("streams: created, default and current", "[cuda]") {
  mg::cuda::Stream created;
  CHECK(created.handle() != nullptr);
  CHECK(created.id() != 0);
  CHECK(created.owned());
  CHECK(created.device() == Device::cuda());
  unsigned int flags = 0;
  MG_CUDA_CHECK(cudaStreamGetFlags(created.handle(), &flags));
  CHECK((flags & cudaStreamNonBlocking) != 0);
  created.synchronize();
  CHECK(created.query());

  mg::cuda::Stream default_stream = mg::cuda::Stream::default_stream();
  CHECK(default_stream.handle() == nullptr);
  CHECK(default_stream.id() == 0);
  CHECK_FALSE(default_stream.owned());
  default_stream.synchronize();

  // Moving hands over ownership: the moved-from stream owns nothing.
  mg::cuda::Stream moved = std::move(created);
  CHECK(moved.owned());
  CHECK_FALSE(created.owned());
  CHECK(created.handle() == nullptr);

  CHECK(mg::cuda::current_stream() == nullptr);
  CHECK(mg::cuda::current_stream_id(Device::cuda()) == 0);
  {
    mg::cuda::StreamGuard outer(moved);
    CHECK(mg::cuda::current_stream() == moved.handle());
    CHECK(mg::cuda::current_stream_id(Device::cuda()) == moved.id());
    CHECK(mg::cuda::Stream::current().handle() == moved.handle());
    mg::cuda::Stream inner_stream;
    {
      mg::cuda::StreamGuard inner(inner_stream);
      CHECK(mg::cuda::current_stream() == inner_stream.handle());
    }
    CHECK(mg::cuda::current_stream() == moved.handle());
    // The current stream is per thread: another thread still sees the default stream.
    cudaStream_t seen_elsewhere = moved.handle();
    std::thread([&] { seen_elsewhere = mg::cuda::current_stream(); }).join();
    CHECK(seen_elsewhere == nullptr);
  }
  CHECK(mg::cuda::current_stream() == nullptr);
}

TEST_CASE("streams: created at the device's highest priority or its normal one", "[cuda]") {
  int lowest = 0;
  int highest = 0;
  MG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
  const mg::cuda::Stream normal;
  const mg::cuda::Stream high(Device::cuda(), mg::cuda::StreamPriority::High);
  int normal_priority = 1;
  int high_priority = 1;
  MG_CUDA_CHECK(cudaStreamGetPriority(normal.handle(), &normal_priority));
  MG_CUDA_CHECK(cudaStreamGetPriority(high.handle(), &high_priority));
  CHECK(normal_priority == lowest);
  CHECK(high_priority == highest);
  CHECK(normal.priority() == mg::cuda::StreamPriority::Normal);
  CHECK(mg::cuda::Stream::default_stream().priority() == mg::cuda::StreamPriority::Normal);
  // Every device memgrad supports (compute capability 3.5 on) has more than one priority.
  CHECK(highest < lowest);
  CHECK(high.priority() == mg::cuda::StreamPriority::High);
  // Work on it runs as on any stream.
  const Tensor ones = mg::ones({1024}, {.device = Device::cuda()});
  Tensor twice;
  {
    mg::cuda::StreamGuard on_high(high);
    twice = ones * 2.0;
  }
  high.synchronize();
  CHECK(twice.to(Device::cpu()).sum().item<float>() == 2048.0f);
}

TEST_CASE("events mark, wait for and time a stream's work", "[cuda]") {
  mg::cuda::Stream stream;
  mg::cuda::Event never_recorded;
  CHECK_FALSE(never_recorded.recorded());
  CHECK(never_recorded.query());  // nothing marked: complete
  never_recorded.synchronize();

  mg::cuda::Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
  {
    StreamHold hold(stream);
    start.record(stream);
    end.record(stream);
    CHECK(start.recorded());
    CHECK_FALSE(end.query());  // queued behind the hold
    CHECK_FALSE(stream.query());
    hold.release();
  }
  end.synchronize();
  CHECK(end.query());
  CHECK(stream.query());
  CHECK(mg::cuda::Event::elapsed_ms(start, end) >= 0.0f);

  mg::cuda::Event untimed;
  untimed.record(stream);
  CHECK_THROWS_WITH(mg::cuda::Event::elapsed_ms(start, untimed),
                    Catch::Contains("enable_timing"));

  // block(): the default stream waits on the device for a held side stream.
  mg::cuda::Stream side;
  mg::cuda::Event side_done;
  {
    StreamHold hold(side);
    side_done.record(side);
    side_done.block(mg::cuda::Stream::default_stream());
    mg::cuda::Event default_done;
    default_done.record(mg::cuda::Stream::default_stream());
    CHECK_FALSE(default_done.query());
    hold.release();
    default_done.synchronize();
    CHECK(default_done.query());
  }
}

TEST_CASE("hold_stream keeps a stream busy on the device for the time asked, the host going on", "[cuda]") {
  // What cuDNN's benchmark mode times its engines behind (cuda/cudnn/conv_engines.cpp).
  mg::cuda::Stream stream;
  mg::cuda::Event before(/*enable_timing=*/true), after(/*enable_timing=*/true);
  before.record(stream);
  mg::cuda::hold_stream(stream, 20'000);
  after.record(stream);
  CHECK_FALSE(after.query());  // the host is back while the device still spins
  after.synchronize();
  const float held_ms = mg::cuda::Event::elapsed_ms(before, after);
  CHECK(held_ms >= 19.9f);
  CHECK(held_ms < 200.0f);

  // A short hold, as the benchmark uses it.
  before.record(stream);
  mg::cuda::hold_stream(stream, 200);
  after.record(stream);
  after.synchronize();
  CHECK(mg::cuda::Event::elapsed_ms(before, after) >= 0.19f);
}

TEST_CASE("allow_tf32 is off by default and switches", "[cuda]") {
  CHECK_FALSE(mg::cuda::allow_tf32());
  mg::cuda::set_allow_tf32(true);
  CHECK(mg::cuda::allow_tf32());
  mg::cuda::set_allow_tf32(false);
  CHECK_FALSE(mg::cuda::allow_tf32());
}

TEST_CASE("to(cuda) and back round-trips random values bit for bit", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Float16}) {
    INFO("dtype " << dtype);
    const Tensor host = random_host(dtype, {37, 53});
    const Tensor device = host.to(Device::cuda());
    CHECK(device.device() == Device::cuda());
    CHECK(device.dtype() == dtype);
    CHECK(device.sizes() == host.sizes());
    const Tensor back = device.to(Device::cpu());
    CHECK(back.device() == Device::cpu());
    CHECK(host_bytes(back) == host_bytes(host));
  }
}

TEST_CASE("a strided host tensor and an offset view round-trip", "[cuda]") {
  const Tensor host = random_host(DType::Float32, {16, 24});
  const Tensor transposed = host.t();  // not contiguous: staged through a contiguous copy
  const Tensor back = transposed.to(Device::cuda()).to(Device::cpu());
  CHECK(host_bytes(back) == host_bytes(transposed));
  const Tensor rows = host.narrow(0, 5, 7);  // contiguous, with a storage offset
  CHECK(host_bytes(rows.to(Device::cuda()).to(Device::cpu())) == host_bytes(rows));
}

TEST_CASE("a channels_last tensor moves as it is laid out, and converts keeping its layout", "[cuda]") {
  const Tensor host = random_host(DType::Float32, {3, 5, 4, 6}).contiguous(mg::MemoryFormat::ChannelsLast);
  const Tensor device = host.to(Device::cuda());
  CHECK(device.strides() == host.strides());  // the bytes moved as they were
  const Tensor back = device.to(Device::cpu());
  CHECK(back.strides() == host.strides());
  CHECK(host_bytes(back) == host_bytes(host));
  // A dtype conversion on the device keeps the layout (autocast's casts of channels_last
  // weights); a channels_last source into a row-major destination is staged.
  const Tensor half = device.to(DType::Float16);
  CHECK(half.strides() == host.strides());
  CHECK(host_bytes(half.to(Device::cpu())) == host_bytes(host.to(DType::Float16)));
  const Tensor row_major = mg::converted_copy(device, DType::Float32, Device::cpu());
  CHECK(row_major.is_contiguous());
  CHECK(host_bytes(row_major) == host_bytes(host));
}

TEST_CASE("pinned memory: factories, pin_memory() and is_pinned", "[cuda]") {
  const Tensor pageable = random_host(DType::Float32, {1000});
  CHECK_FALSE(pageable.is_pinned());
  const Tensor pinned = pageable.pin_memory();
  CHECK(pinned.is_pinned());
  CHECK(pinned.device() == Device::cpu());
  CHECK(host_bytes(pinned) == host_bytes(pageable));
  CHECK(pinned.pin_memory().is_same(pinned));  // already pinned: itself

  const Tensor made_pinned = mg::empty({64}, {.pin_memory = true});
  CHECK(made_pinned.is_pinned());
  cudaPointerAttributes attributes{};
  MG_CUDA_CHECK(cudaPointerGetAttributes(&attributes, made_pinned.raw_data()));
  CHECK(attributes.type == cudaMemoryTypeHost);  // page-locked, known to CUDA

  CHECK_THROWS_WITH(mg::empty({4}, {.device = Device::cuda(), .pin_memory = true}),
                    Catch::Contains("CPU tensors only"));
  CHECK_THROWS_WITH(pinned.to(Device::cuda()).pin_memory(), Catch::Contains("only CPU tensors"));
}

TEST_CASE("a non_blocking copy from pinned memory gives the values after synchronize",
          "[cuda]") {
  const Tensor pinned = random_host(DType::Float32, {1 << 20}).pin_memory();  // 4 MiB
  const Tensor device = pinned.to(Device::cuda(), /*non_blocking=*/true);
  mg::cuda::synchronize();
  CHECK(host_bytes(device.to(Device::cpu())) == host_bytes(pinned));

  // And into pinned memory from the device, via copy_across_devices directly.
  const Tensor pinned_back = mg::empty({1 << 20}, {.pin_memory = true});
  mg::copy_across_devices(device, pinned_back, /*non_blocking=*/true);
  mg::cuda::synchronize();
  CHECK(host_bytes(pinned_back) == host_bytes(pinned));
}

TEST_CASE("a pinned block is not reused while a non_blocking copy from it may still run",
          "[cuda]") {
  mg::CachingAllocator& pinned_allocator = mg::cuda::pinned_host_allocator();
  mg::cuda::Stream stream;
  mg::cuda::StreamGuard use(stream);
  const Tensor expected = random_host(DType::Float32, {4096});  // 16 KiB
  // Everything that may cudaMalloc or cudaHostAlloc happens before the stream is held.
  const Tensor device = mg::empty({4096}, {.device = Device::cuda()});
  Tensor pinned = expected.pin_memory();
  void* const pinned_address = pinned.raw_data();
  {
    StreamHold hold(stream);
    mg::copy_across_devices(pinned, device, /*non_blocking=*/true);  // queued behind the hold
    pinned = Tensor();
    // The pinned tensor is gone but its copy has not run: its block waits (active, not
    // allocated), and a new pinned tensor does not get (and overwrite) it.
    const mg::MemoryStats stats = pinned_allocator.stats();
    CHECK(stats.active_bytes.current - stats.allocated_bytes.current == 16384);
    const Tensor overwrite = mg::full({4096}, 7.0, {.pin_memory = true});
    CHECK(overwrite.raw_data() != pinned_address);
    hold.release();
  }
  stream.synchronize();
  CHECK(host_bytes(device.to(Device::cpu())) == host_bytes(expected));
  // The copy is done: the next pinned allocation finishes the free.
  const Tensor after = mg::empty({1}, {.pin_memory = true});
  const mg::MemoryStats stats = pinned_allocator.stats();
  CHECK(stats.active_bytes.current == stats.allocated_bytes.current);
}

TEST_CASE("record_stream checks the stream's device", "[cuda]") {
  const Tensor host = random_host(DType::Float32, {8});
  mg::cuda::Stream stream;
  CHECK_THROWS_WITH(mg::cuda::record_stream(host, stream), Catch::Contains("record_stream"));
  const Tensor device = host.to(Device::cuda());
  mg::cuda::record_stream(device, stream);  // fine: same device
}
