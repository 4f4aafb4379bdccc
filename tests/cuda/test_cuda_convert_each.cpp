// tests/cuda/test_cuda_convert_each.cpp — the batched float32 -> float16 / bfloat16 cast
// and its way back (cuda/kernels/convert_each.cu) against the CPU's conversion, bit for bit: sizes around the
// vector width and the chunk, empty tensors, views at odd offsets (the scalar path, whose
// neighbours must stay untouched), channels_last tensors, more tensors than one launch
// holds, and values beyond float16's range; and its refusals.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

namespace {

// Fresh normal values times `scale` (so some reach float16's infinity when it is large),
// scaled on the CPU and copied: the same bits on both devices.
Pair scaled_pair(const Shape& sizes, uint64_t seed, Layout layout, double scale) {
  Pair pair = random_pair(sizes, DType::Float32, seed, layout);
  pair.cpu_base.mul_(scale);
  pair.cuda_base = pair.cpu_base.to(kCuda);
  pair.cuda = view_of(pair.cuda_base, sizes, layout);
  return pair;
}

// scaled_pair's values in `dtype`, the same bits on both devices.
Pair scaled_pair_in(DType dtype, const Shape& sizes, uint64_t seed, Layout layout, double scale) {
  Pair pair = scaled_pair(sizes, seed, layout, scale);
  pair.cpu_base = pair.cpu_base.to(dtype);
  pair.cpu = view_of(pair.cpu_base, sizes, layout);
  pair.cuda_base = pair.cpu_base.to(kCuda);
  pair.cuda = view_of(pair.cuda_base, sizes, layout);
  return pair;
}

// Converts every source on the GPU in one call and checks each result, and each
// destination buffer around its view, against the CPU's conversion.
void check_convert_each(const std::vector<Pair>& sources, DType dtype, Layout destination_layout) {
  std::vector<Tensor> cuda_sources, destinations;
  std::vector<Pair> destination_buffers;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Tensor& source = sources[i].cuda;
    // Random bytes under the destinations too: whatever the kernel must not write stays.
    destination_buffers.push_back(random_pair(source.sizes(), dtype, 9000 + i, destination_layout));
    Tensor destination = destination_buffers.back().cuda;
    if (suggest_memory_format(source) == MemoryFormat::ChannelsLast) {
      destination = empty(source.sizes(), {.dtype = dtype, .device = kCuda}, MemoryFormat::ChannelsLast);
    }
    cuda_sources.push_back(source);
    destinations.push_back(destination);
  }
  gpu_kernels().convert_each(cuda_sources, destinations);
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string what = "tensor " + std::to_string(i) + " of shape " + sources[i].cpu.sizes().str();
    Tensor expected = empty(sources[i].cpu.sizes(), {.dtype = dtype}, suggest_memory_format(destinations[i]));
    cpu_kernels().copy(sources[i].cpu, expected);
    check_equal(destinations[i], expected, what);
    if (destinations[i].is_same(destination_buffers[i].cuda)) {
      // The buffer outside the view: as it was.
      Tensor outside_expected = destination_buffers[i].cpu_base.clone();
      view_of(outside_expected, sources[i].cpu.sizes(), destination_layout).copy_(expected);
      check_equal(destination_buffers[i].cuda_base, outside_expected, what + ", its whole buffer");
    }
  }
}

}  // namespace

TEST_CASE("CUDA convert_each casts many float32 tensors as the CPU converts each", "[cuda][convert_each]") {
  // Around the vector width (4), the chunk (4096 elements) and several chunks.
  const std::vector<int64_t> sizes{0, 1, 3, 4, 5, 7, 8, 15, 17, 255, 1000, 4095, 4096, 4097, 8191, 12289, 65537};
  for (DType dtype : kHalfTypes) {
    INFO(dtype);
    for (Layout layout : {Layout::Contiguous, Layout::Offset}) {
      INFO(layout_name(layout));
      std::vector<Pair> sources;
      for (size_t i = 0; i < sizes.size(); ++i) {
        sources.push_back(scaled_pair({sizes[i]}, 100 + i, layout, i % 3 == 0 ? 30000.0 : 1.0));
      }
      // A matrix and a channels_last weight, as a model's parameters are.
      sources.push_back(scaled_pair({33, 65}, 200, layout, 1.0));
      if (layout == Layout::Contiguous) {
        Pair weight = scaled_pair({8, 3, 5, 7}, 201, layout, 1.0);
        weight.cpu = weight.cpu.contiguous(MemoryFormat::ChannelsLast);
        weight.cuda = weight.cuda.contiguous(MemoryFormat::ChannelsLast);
        sources.push_back(weight);
      }
      // Sources aligned, destinations at odd offsets, and the reverse: the scalar path either way.
      check_convert_each(sources, dtype, Layout::Contiguous);
      check_convert_each(sources, dtype, Layout::Offset);
    }
  }
}

TEST_CASE("CUDA convert_each converts many float16 / bfloat16 tensors back to float32 as the CPU does",
          "[cuda][convert_each]") {
  // The way back: autocast's parameters' 16-bit gradients into their float32 .grad.
  const std::vector<int64_t> sizes{0, 1, 3, 4, 5, 7, 8, 255, 4095, 4096, 4097, 12289, 65537};
  for (DType from : kHalfTypes) {
    INFO(from);
    for (Layout layout : {Layout::Contiguous, Layout::Offset}) {
      INFO(layout_name(layout));
      std::vector<Pair> sources;
      for (size_t i = 0; i < sizes.size(); ++i) {
        sources.push_back(scaled_pair_in(from, {sizes[i]}, 500 + i, layout, i % 3 == 0 ? 30000.0 : 1.0));
      }
      if (layout == Layout::Contiguous) {
        Pair weight = scaled_pair_in(from, {8, 3, 5, 7}, 600, layout, 1.0);
        weight.cpu = weight.cpu.contiguous(MemoryFormat::ChannelsLast);
        weight.cuda = weight.cuda.contiguous(MemoryFormat::ChannelsLast);
        sources.push_back(weight);
      }
      check_convert_each(sources, DType::Float32, Layout::Contiguous);
      check_convert_each(sources, DType::Float32, Layout::Offset);
    }
  }
}

TEST_CASE("CUDA convert_each takes more tensors than one launch holds", "[cuda][convert_each]") {
  // 2,000 tensors of 0 to 5,000 elements: three launches of up to 902.
  std::vector<Pair> sources;
  for (int64_t i = 0; i < 2000; ++i) {
    sources.push_back(scaled_pair({(i * 2503) % 5001}, 300 + i, Layout::Contiguous, 2.0));
  }
  for (DType dtype : kHalfTypes) {
    INFO(dtype);
    check_convert_each(sources, dtype, Layout::Contiguous);
  }
}

TEST_CASE("CUDA convert_each refuses what it cannot walk as flat arrays, naming the pair", "[cuda][convert_each]") {
  const Tensor source = random_values({4, 6}, DType::Float32, 400).to(kCuda);
  const Tensor destination = empty({4, 6}, {.dtype = DType::Float16, .device = kCuda});
  auto convert = [](const Tensor& from, const Tensor& to) {
    const std::vector<Tensor> sources{from}, destinations{to};
    gpu_kernels().convert_each(sources, destinations);
  };
  CHECK_THROWS_WITH(convert(source.t(), empty({6, 4}, {.dtype = DType::Float16, .device = kCuda})),
                    Catch::Contains("pair 0") && Catch::Contains("dense"));
  CHECK_THROWS_WITH(convert(source.to(DType::Float64), destination), Catch::Contains("got float64 to float16"));
  CHECK_THROWS_WITH(convert(source, empty({4, 6}, {.dtype = DType::Float64, .device = kCuda})),
                    Catch::Contains("float16 or bfloat16 or back"));
  CHECK_THROWS_WITH(convert(destination, empty({4, 6}, {.dtype = DType::BFloat16, .device = kCuda})),
                    Catch::Contains("got float16 to bfloat16"));
  // A pair unlike the first: float32 first, then a float16 source.
  CHECK_THROWS_WITH(gpu_kernels().convert_each(std::vector<Tensor>{source, destination},
                                               std::vector<Tensor>{destination, source}),
                    Catch::Contains("pair 1 must be a float32 source"));
  CHECK_THROWS_WITH(convert(source, empty({6, 4}, {.dtype = DType::Float16, .device = kCuda})),
                    Catch::Contains("float16 destination of shape [6, 4]"));
  CHECK_THROWS_WITH(gpu_kernels().convert_each(std::vector<Tensor>{source, source}, std::vector<Tensor>{destination}),
                    Catch::Contains("2 sources but 1 destinations"));
}
