// tests/cuda/test_cuda_elementwise.cpp — what the every-op loop (tests/cuda/
// test_cuda_every_op.cpp: every elementwise op, dtype, broadcast and view against the CPU)
// does not cover: errors for what the kernels refuse, chains through the public API, large
// and misaligned operands (vector paths and tails, grid-stride loops, 64-bit indexing),
// channels-last operands; copy/fill/random/dropout are in test_cuda_copy_random.cpp, the
// optimizer kernels in test_cuda_optimizer.cpp.
//
// Each check runs the same kernel on the CPU and on the GPU over the same values in the
// same layout (contiguous, broadcast, transposed, sliced with a step, at a misaligned
// offset), then compares the whole underlying buffers, so a kernel that writes outside its
// view fails too (tolerances: tests/cuda/kernel_checks.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/cuda/kernels/cuda_kernels.h"
#include "memgrad/memgrad.h"

using namespace mg;
using namespace cuda_checks;

TEST_CASE("CUDA elementwise kernels reject what they do not support, with a clear error", "[cuda]") {
  Tensor a = random_values({3, 4}, DType::Float32, 1).to(kCuda);
  Tensor out = empty({3, 4}, {.device = kCuda});
  CHECK_THROWS_AS(gpu_kernels().binary(BinaryOp::Pow, a, a, out), Error);
  Tensor integers = random_values({3, 4}, DType::Int64, 2).to(kCuda);
  Tensor integer_out = empty({3, 4}, {.dtype = DType::Int64, .device = kCuda});
  CHECK_THROWS_AS(gpu_kernels().unary(UnaryOp::Exp, integers, integer_out), Error);
}

TEST_CASE("CUDA elementwise ops through the public API, forward and backward, match the CPU", "[cuda]") {
  Tensor x_cpu = random_values({17, 33}, DType::Float32, 11);
  Tensor y_cpu = random_values({17, 33}, DType::Float32, 12);
  Tensor x_cuda = x_cpu.to(kCuda);
  Tensor y_cuda = y_cpu.to(kCuda);
  for (const Tensor& t : {x_cpu, y_cpu, x_cuda, y_cuda}) t.requires_grad_();

  auto compute = [](const Tensor& x, const Tensor& y) {
    Tensor smooth = gelu(x) * sigmoid(y) + tanh(x) * relu(y);
    Tensor positive = sqrt(abs(x) + 1.0) * log(exp(-y) + 2.0);
    Tensor mixed = maximum(x, y) - minimum(x, y) / (abs(y) + 0.5) + pow(x, 2.0) * 0.25 - (1.0 - x) / 3.0;
    return smooth + positive * mixed - neg(y);
  };
  Tensor z_cpu = compute(x_cpu, y_cpu);
  Tensor z_cuda = compute(x_cuda, y_cuda);
  REQUIRE(z_cuda.device() == kCuda);
  check_close(z_cuda, z_cpu, 1e-5, "forward");  // a chain of ~20 float32 ops

  Tensor seed_gradient = random_values({17, 33}, DType::Float32, 13);
  z_cpu.backward(seed_gradient);
  z_cuda.backward(seed_gradient.to(kCuda));
  check_close(x_cuda.grad(), x_cpu.grad(), 1e-5, "x.grad");
  check_close(y_cuda.grad(), y_cpu.grad(), 1e-5, "y.grad");

  // Broadcasting, comparisons and type promotion, forward only.
  Tensor row_cpu = random_values({1, 33}, DType::Float64, 14);
  Tensor column_cpu = random_values({17, 1}, DType::Float32, 15);
  check_close(add(row_cpu.to(kCuda), column_cpu.to(kCuda)), add(row_cpu, column_cpu), 1e-12, "float64 row + float32 column");
  check_equal(gt(x_cuda.detach(), y_cuda.detach()), gt(x_cpu.detach(), y_cpu.detach()), "x > y");
  check_equal(le(x_cuda.detach(), 0.25), le(x_cpu.detach(), 0.25), "x <= 0.25");
}

// ---------------------------------------------------------------------------------------
// large tensors: vectorised bodies and tails, misaligned views, grid-stride loops, and
// 64-bit indexing
// ---------------------------------------------------------------------------------------

TEST_CASE("CUDA elementwise kernels on large tensors: vector paths, tails and misaligned views", "[cuda]") {
  // (1 << 20) + 3 leaves a tail after every vector width (2, 4, 8 and 16 elements); the
  // offset views start 1 element in, so no 16-byte vector access is aligned.
  const int64_t n = (1 << 20) + 3;
  uint64_t seed = 12000;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16}) {
    for (Layout layout : {Layout::Contiguous, Layout::Offset}) {
      std::string what = std::string(dtype_name(dtype)) + " " + layout_name(layout);
      Pair a = random_pair({n}, dtype, seed += 4, layout);
      Pair b = random_pair({n}, dtype, seed += 4, layout);
      Pair out = random_pair({n}, dtype, seed += 4, layout);
      cpu_kernels().binary(BinaryOp::Mul, a.cpu, b.cpu, out.cpu);
      gpu_kernels().binary(BinaryOp::Mul, a.cuda, b.cuda, out.cuda);
      check_close(out.cuda_base, out.cpu_base, tolerance(dtype), "mul " + what);

      Pair mask = random_pair({n}, DType::Bool, seed += 4, layout);
      cpu_kernels().binary(BinaryOp::Lt, a.cpu, b.cpu, mask.cpu);
      gpu_kernels().binary(BinaryOp::Lt, a.cuda, b.cuda, mask.cuda);
      check_equal(mask.cuda_base, mask.cpu_base, "lt " + what);

      cpu_kernels().unary(UnaryOp::Exp, a.cpu, out.cpu);
      gpu_kernels().unary(UnaryOp::Exp, a.cuda, out.cuda);
      check_close(out.cuda_base, out.cpu_base, tolerance(dtype), "exp " + what);

      Pair converted = random_pair({n}, DType::BFloat16, seed += 4, layout);
      cpu_kernels().copy(a.cpu, converted.cpu);
      gpu_kernels().copy(a.cuda, converted.cuda);
      check_equal(converted.cuda_base, converted.cpu_base, "copy to bfloat16 " + what);

      cpu_kernels().copy(b.cpu, out.cpu);
      gpu_kernels().copy(b.cuda, out.cuda);
      check_equal(out.cuda_base, out.cpu_base, "copy same dtype " + what);

      cpu_kernels().fill(out.cpu, 2.5);
      gpu_kernels().fill(out.cuda, 2.5);
      check_equal(out.cuda_base, out.cpu_base, "fill " + what);

      cpu_kernels().binary_scalar(BinaryOp::Add, a.cpu, -0.75, out.cpu);
      gpu_kernels().binary_scalar(BinaryOp::Add, a.cuda, -0.75, out.cuda);
      check_close(out.cuda_base, out.cpu_base, tolerance(dtype), "add scalar " + what);
    }
  }
}

TEST_CASE("CUDA elementwise kernels loop over grids larger than one launch covers", "[cuda]") {
  // 8192 blocks x 256 threads is the most one launch uses: 9'000'003 elements make every
  // thread of the strided kernel loop, and every thread of the float32 vector kernel
  // (4 elements per access) loop once more.
  const int64_t n = 9'000'003;
  Pair a = random_pair({n}, DType::Float32, 13000);
  Pair out = random_pair({n}, DType::Float32, 13001);
  cpu_kernels().unary(UnaryOp::Tanh, a.cpu, out.cpu);
  gpu_kernels().unary(UnaryOp::Tanh, a.cuda, out.cuda);
  check_close(out.cuda_base, out.cpu_base, 1e-6, "tanh, vectorised");

  Pair strided_in = random_pair({3000, 3001}, DType::Float32, 13002, Layout::Transposed);
  Pair strided_out = random_pair({3000, 3001}, DType::Float32, 13003);
  cpu_kernels().unary(UnaryOp::Sigmoid, strided_in.cpu, strided_out.cpu);
  gpu_kernels().unary(UnaryOp::Sigmoid, strided_in.cuda, strided_out.cuda);
  check_close(strided_out.cuda_base, strided_out.cpu_base, 1e-6, "sigmoid, strided");

  Pair uniform_cpu_cuda = random_pair({n}, DType::Float32, 13004);
  PhiloxState rng{.seed = 3, .offset = 1ull << 40};
  cpu_kernels().fill_uniform(uniform_cpu_cuda.cpu, 0.0, 1.0, rng);
  gpu_kernels().fill_uniform(uniform_cpu_cuda.cuda, 0.0, 1.0, rng);
  check_equal(uniform_cpu_cuda.cuda_base, uniform_cpu_cuda.cpu_base, "uniform");
}

TEST_CASE("CUDA elementwise kernels index tensors of more than 2^31 elements", "[cuda]") {
  // column (65537, 1) + row (1, 32771) -> 2'147'713'... elements of uint8 (2 GiB): past
  // the 32-bit index range, so the indexer divides in 64 bits. Checked on a few rows and
  // on the last elements, against the CPU's modular uint8 sums.
  const int64_t rows = 65537, columns = 32771;
  REQUIRE(rows * columns > (int64_t{1} << 31));
  Tensor column_cpu = random_values({rows, 1}, DType::UInt8, 14000);
  Tensor row_cpu = random_values({1, columns}, DType::UInt8, 14001);
  Tensor sum_cuda = empty({rows, columns}, {.dtype = DType::UInt8, .device = kCuda});
  gpu_kernels().binary(BinaryOp::Add, column_cpu.to(kCuda), row_cpu.to(kCuda), sum_cuda);
  for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{40000}, rows - 1}) {
    Tensor expected = empty({1, columns}, {.dtype = DType::UInt8});
    cpu_kernels().binary(BinaryOp::Add, narrow(column_cpu, 0, r, 1), row_cpu, expected);
    check_equal(narrow(sum_cuda, 0, r, 1), expected, "row " + std::to_string(r));
  }
  sum_cuda = Tensor();  // give the 2 GiB back before other tests run
}

// ---------------------------------------------------------------------------------------
// channels-last operands
// ---------------------------------------------------------------------------------------

// All-channels-last operands run the flat (vectorised) path: the dims are walked in memory
// order. Results must be the CPU's (computed in NCHW) and stay channels-last.
TEST_CASE("CUDA elementwise ops on channels_last tensors keep the layout and match the CPU", "[cuda]") {
  const MemoryFormat kLast = MemoryFormat::ChannelsLast;
  for (DType dtype : {DType::Float32, DType::Float16}) {
    INFO("dtype " << dtype);
    double rtol = dtype == DType::Float32 ? 1e-5 : tolerance(dtype);
    Tensor x_cpu = random_values({8, 32, 5, 7}, dtype, 21);
    Tensor y_cpu = random_values({8, 32, 5, 7}, dtype, 22);
    Tensor bias_cpu = random_values({1, 32, 1, 1}, dtype, 23);
    Tensor x_cuda = contiguous_copy(x_cpu.to(kCuda), kLast);
    Tensor y_cuda = contiguous_copy(y_cpu.to(kCuda), kLast);
    Tensor bias_cuda = bias_cpu.to(kCuda);
    for (const Tensor& t : {x_cpu, x_cuda}) t.requires_grad_();

    auto compute = [](const Tensor& x, const Tensor& y, const Tensor& bias) {
      return relu(add(mul(x, bias), y)) * 2.0 - y;
    };
    Tensor z_cpu = compute(x_cpu, y_cpu, bias_cpu);
    Tensor z_cuda = compute(x_cuda, y_cuda, bias_cuda);
    CHECK(is_contiguous_in(z_cuda, kLast));
    check_close(z_cuda, z_cpu, rtol, "relu(x * bias + y) * 2 - y");

    // The incoming gradient is NCHW; relu's gradient still follows the saved output.
    Tensor seed_gradient = random_values({8, 32, 5, 7}, dtype, 24);
    z_cpu.backward(seed_gradient);
    z_cuda.backward(seed_gradient.to(kCuda));
    check_close(x_cuda.grad(), x_cpu.grad(), rtol, "x.grad");

    // The kernels directly, all operands channels-last.
    Tensor out_cpu = empty_like(x_cpu);
    Tensor out_cuda = empty({8, 32, 5, 7}, {.dtype = dtype, .device = kCuda}, kLast);
    cpu_kernels().binary(BinaryOp::ReluBackward, y_cpu, x_cpu.detach(), out_cpu);
    gpu_kernels().binary(BinaryOp::ReluBackward, y_cuda, x_cuda.detach(), out_cuda);
    check_close(out_cuda, out_cpu, 0.0, "relu backward");
    cpu_kernels().unary(UnaryOp::Relu, x_cpu.detach(), out_cpu);
    gpu_kernels().unary(UnaryOp::Relu, x_cuda.detach(), out_cuda);
    check_close(out_cuda, out_cpu, 0.0, "relu");
    gpu_kernels().fill(out_cuda, 1.5);
    check_close(out_cuda, full({8, 32, 5, 7}, 1.5, {.dtype = dtype}), 0.0, "fill");
  }
}

TEST_CASE("CUDA copies between NCHW and channels_last keep every value in place", "[cuda]") {
  Tensor x_cpu = random_values({3, 17, 6, 5}, DType::Float32, 31);
  Tensor last = contiguous_copy(x_cpu.to(kCuda), MemoryFormat::ChannelsLast);
  CHECK(is_contiguous_in(last, MemoryFormat::ChannelsLast));
  check_close(last, x_cpu, 0.0, "to channels_last");
  Tensor back = contiguous_copy(last, MemoryFormat::Contiguous);
  CHECK(back.is_contiguous());
  check_close(back, x_cpu, 0.0, "back to NCHW");
  Tensor converted = empty({3, 17, 6, 5}, {.dtype = DType::Float16, .device = kCuda}, MemoryFormat::ChannelsLast);
  gpu_kernels().copy(last, converted);
  check_close(converted, converted_copy(x_cpu, DType::Float16, Device::cpu()), 0.0, "to float16, channels_last");
}

// ---------------------------------------------------------------------------------------
// GELU's tanh approximation against PyTorch's values (every dtype and layout against the
// CPU: tests/cuda/test_cuda_every_op.cpp)
// ---------------------------------------------------------------------------------------

TEST_CASE("CUDA gelu with the tanh approximation gives PyTorch's values and the CPU's gradient", "[cuda]") {
  // Through the public API: PyTorch's values, and the gradient against the CPU's.
  Tensor points = from_vector<double>({1.0, -1.0}).to(kCuda);
  std::vector<double> values = gelu(points, GeluApproximate::Tanh).to(Device::cpu()).to_vector<double>();
  CHECK(values[0] == Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(values[1] == Approx(-0.15880800939172324).epsilon(1e-14));
  Tensor x_cpu = random_values({17, 33}, DType::Float32, 21);
  Tensor x_cuda = x_cpu.to(kCuda);
  for (const Tensor& t : {x_cpu, x_cuda}) t.requires_grad_();
  Tensor y_cpu = gelu(x_cpu, GeluApproximate::Tanh), y_cuda = gelu(x_cuda, GeluApproximate::Tanh);
  check_close(y_cuda, y_cpu, 1e-6, "gelu tanh forward");
  Tensor seed_gradient = random_values({17, 33}, DType::Float32, 22);
  y_cpu.backward(seed_gradient);
  y_cuda.backward(seed_gradient.to(kCuda));
  check_close(x_cuda.grad(), x_cpu.grad(), 1e-6, "gelu tanh x.grad");
}
