// tests/cuda/test_cuda_copy_random.cpp — the CUDA copy, fill, random-number and dropout
// kernels against the CPU kernels: conversions between every pair of dtypes, fills of any
// view, the same Philox numbers and dropout masks as the CPU for the same seed.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

// ---------------------------------------------------------------------------------------
// copy, fill, random numbers
// ---------------------------------------------------------------------------------------

TEST_CASE("CUDA copies convert between every pair of dtypes as the CPU does", "[cuda]") {
  uint64_t seed = 4000;
  for (DType from : kAllTypes) {
    for (DType to : kAllTypes) {
      // randn * 10 in the source dtype; a float's conversion to uint8 is defined in C++
      // only for values in range, so those sources are non-negative.
      bool non_negative = to == DType::UInt8 && is_floating(from);
      for (auto [in_layout, out_layout] : {std::pair{Layout::Contiguous, Layout::Contiguous},
                                           std::pair{Layout::Transposed, Layout::Contiguous},
                                           std::pair{Layout::Contiguous, Layout::Strided}}) {
        Pair source = random_pair({13, 29}, from, seed += 2, in_layout, non_negative ? Values::Positive : Values::Normal);
        if (is_floating(from)) {
          // Scale floats to randn * 10 on the CPU: fractional values of both signs.
          cpu_kernels().binary_scalar(BinaryOp::Mul, source.cpu_base, 10.0, source.cpu_base);
          source.cuda_base = source.cpu_base.to(kCuda);
          source.cuda = view_of(source.cuda_base, {13, 29}, in_layout);
        }
        Pair destination = random_pair({13, 29}, to, seed += 2, out_layout);
        cpu_kernels().copy(source.cpu, destination.cpu);
        gpu_kernels().copy(source.cuda, destination.cuda);
        check_equal(destination.cuda_base, destination.cpu_base,
                    std::string("copy ") + dtype_name(from) + " -> " + dtype_name(to) + " " + layout_name(in_layout) +
                        " -> " + layout_name(out_layout));
      }
    }
  }
  // A broadcast source (stride 0), as copy_ with a smaller source sends.
  Pair row = random_pair({1, 29}, DType::Float32, seed += 2);
  Pair destination = random_pair({13, 29}, DType::Float16, seed += 2);
  cpu_kernels().copy(expand(row.cpu, {13, 29}), destination.cpu);
  gpu_kernels().copy(expand(row.cuda, {13, 29}), destination.cuda);
  check_equal(destination.cuda_base, destination.cpu_base, "copy of an expanded row");
}

TEST_CASE("CUDA fill writes the CPU's values into any view", "[cuda]") {
  uint64_t seed = 5000;
  for (DType dtype : kAllTypes) {
    for (double value : {0.0, -0.0, 1.0, 3.5, -2.25}) {
      for (Layout layout : {Layout::Contiguous, Layout::Offset, Layout::Strided, Layout::Transposed}) {
        Pair target = random_pair({9, 31}, dtype, seed += 2, layout, Values::Positive);
        cpu_kernels().fill(target.cpu, value);
        gpu_kernels().fill(target.cuda, value);
        check_equal(target.cuda_base, target.cpu_base,
                    std::string("fill ") + std::to_string(value) + " " + dtype_name(dtype) + " " + layout_name(layout));
      }
    }
  }
}

TEST_CASE("CUDA rand and randn give the CPU's numbers for the same generator seed", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (uint64_t seed : {0ull, 1234ull}) {
      Generator cpu_generator(seed), cuda_generator(seed);
      // A first draw moves the offset, so the second starts mid-stream.
      Tensor first_cpu = rand({5, 7}, {.dtype = dtype}, &cpu_generator);
      Tensor first_cuda = rand({5, 7}, {.dtype = dtype, .device = kCuda}, &cuda_generator);
      check_equal(first_cuda, first_cpu, std::string("rand ") + dtype_name(dtype));
      Tensor uniform_cpu = rand({301, 17}, {.dtype = dtype}, &cpu_generator);
      Tensor uniform_cuda = rand({301, 17}, {.dtype = dtype, .device = kCuda}, &cuda_generator);
      check_equal(uniform_cuda, uniform_cpu, std::string("rand after an offset ") + dtype_name(dtype));
      Tensor normal_cpu = randn({301, 17}, {.dtype = dtype}, &cpu_generator);
      Tensor normal_cuda = randn({301, 17}, {.dtype = dtype, .device = kCuda}, &cuda_generator);
      check_close(normal_cuda, normal_cpu, tolerance(dtype), std::string("randn ") + dtype_name(dtype));
      // Other ranges, and a strided destination (filled through a contiguous temporary).
      Pair target = random_pair({23, 19}, dtype, seed + 7, Layout::Strided);
      uniform_(target.cpu, -2.0, 3.0, &cpu_generator);
      uniform_(target.cuda, -2.0, 3.0, &cuda_generator);
      check_close(target.cuda_base, target.cpu_base, tolerance(dtype), std::string("uniform_(-2, 3) ") + dtype_name(dtype));
      Pair normal_target = random_pair({23, 19}, dtype, seed + 8, Layout::Transposed);
      normal_(normal_target.cpu, 0.5, 2.0, &cpu_generator);
      normal_(normal_target.cuda, 0.5, 2.0, &cuda_generator);
      check_close(normal_target.cuda_base, normal_target.cpu_base, tolerance(dtype),
                  std::string("normal_(0.5, 2) ") + dtype_name(dtype));
    }
  }
  // randint draws uniform doubles and truncates them.
  Generator cpu_generator(99), cuda_generator(99);
  check_equal(randint(-5, 17, {40, 9}, {.dtype = DType::Int64, .device = kCuda}, &cuda_generator),
              randint(-5, 17, {40, 9}, {.dtype = DType::Int64}, &cpu_generator), "randint");
}

// ---------------------------------------------------------------------------------------
// dropout
// ---------------------------------------------------------------------------------------

TEST_CASE("CUDA dropout draws the CPU's mask for the same seed and scales the same way", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (double p : {0.1, 0.5, 0.9}) {
      Pair input = random_pair({1000, 37}, dtype, 6000);
      PhiloxState rng{.seed = 77, .offset = 12345};
      Tensor mask_cpu = empty({1000, 37}, {.dtype = DType::Bool});
      Tensor mask_cuda = empty({1000, 37}, {.dtype = DType::Bool, .device = kCuda});
      Tensor out_cpu = empty({1000, 37}, {.dtype = dtype});
      Tensor out_cuda = empty({1000, 37}, {.dtype = dtype, .device = kCuda});
      cpu_kernels().dropout(input.cpu, p, rng, mask_cpu, out_cpu);
      gpu_kernels().dropout(input.cuda, p, rng, mask_cuda, out_cuda);
      std::string what = std::string("dropout ") + dtype_name(dtype) + " p=" + std::to_string(p);
      check_equal(mask_cuda, mask_cpu, what + " mask");
      check_equal(out_cuda, out_cpu, what + " output");
      // The mask is not degenerate: about 1 - p of it is kept.
      std::vector<double> kept = host_values(mask_cuda);
      double fraction = 0;
      for (double k : kept) fraction += k;
      fraction /= static_cast<double>(kept.size());
      CHECK(std::abs(fraction - (1 - p)) < 0.02);
    }
  }
  // Through the public API, with the backward pass (masked_scale).
  Tensor x_cpu = random_values({64, 129}, DType::Float32, 6100);
  Tensor x_cuda = x_cpu.to(kCuda);
  x_cpu.requires_grad_();
  x_cuda.requires_grad_();
  Generator cpu_generator(5), cuda_generator(5);
  Tensor y_cpu = dropout(x_cpu, 0.3, true, &cpu_generator);
  Tensor y_cuda = dropout(x_cuda, 0.3, true, &cuda_generator);
  check_equal(y_cuda, y_cpu, "mg::dropout forward");
  Tensor gradient = random_values({64, 129}, DType::Float32, 6101);
  y_cpu.backward(gradient);
  y_cuda.backward(gradient.to(kCuda));
  check_equal(x_cuda.grad(), x_cpu.grad(), "mg::dropout backward");
}

TEST_CASE("CUDA masked_scale matches the CPU, also with a broadcast mask and strided views", "[cuda]") {
  uint64_t seed = 6200;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (auto [mask_sizes, grad_layout] : {std::pair{Shape{21, 35}, Layout::Contiguous},
                                           std::pair{Shape{1, 35}, Layout::Transposed},
                                           std::pair{Shape{21, 35}, Layout::Offset}}) {
      Pair grad = random_pair({21, 35}, dtype, seed += 3, grad_layout);
      Pair mask = random_pair(mask_sizes, DType::Bool, seed += 3, Layout::Contiguous, Values::SmallIntegers);
      Pair output = random_pair({21, 35}, dtype, seed += 3);
      cpu_kernels().masked_scale(grad.cpu, mask.cpu, 1.0 / 0.7, output.cpu);
      gpu_kernels().masked_scale(grad.cuda, mask.cuda, 1.0 / 0.7, output.cuda);
      check_equal(output.cuda_base, output.cpu_base,
                  std::string("masked_scale ") + dtype_name(dtype) + " mask " + mask_sizes.str());
    }
  }
}
