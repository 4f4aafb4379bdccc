// tests/cuda/test_cuda_matmul.cpp — matmul and linear through cuBLAS against the CPU
// (Eigen) on fresh random inputs: 2-D with odd sizes, transposed views, batched, broadcast
// (batch stride 0) and strided operands, vectors, empty products, float16/bfloat16,
// linear with bias and its gradients; linear_forward (the bias in cuBLASLt's epilogue) for
// every floating dtype, odd and degenerate sizes and misaligned operands; the cuBLAS
// workspace showing up as WORKSPACE, shared by cuBLASLt; and the TF32 switch (off by
// default).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/cuda/blas_handle.h"
#include "cuda/kernel_checks.h"
#include "memgrad/cuda/runtime.h"

using namespace mg;

namespace {

using cuda_checks::host_values;

Tensor normal(const Shape& sizes, DType dtype, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype}, &generator);
}

// The same bytes on the GPU (no conversion on either side).
Tensor on_cuda(const Tensor& tensor) { return converted_copy(tensor, tensor.dtype(), Device::cuda()); }

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return 1e-12;
    case DType::Float32: return 1e-4;
    default: return 1e-2;  // float16, bfloat16
  }
}

// The largest |cuda - cpu| relative to the largest |cpu| (at least 1e-30); sizes and dtype
// must agree.
double relative_error(const Tensor& cuda_result, const Tensor& cpu_result) {
  REQUIRE(cuda_result.device().is_cuda());
  REQUIRE(cuda_result.sizes() == cpu_result.sizes());
  REQUIRE(cuda_result.dtype() == cpu_result.dtype());
  std::vector<double> got = host_values(cuda_result), expected = host_values(cpu_result);
  double scale = 1e-30, worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::abs(expected[i]));
    double error = std::abs(got[i] - expected[i]);
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
  }
  return worst / scale;
}

void check_matches(const Tensor& cuda_result, const Tensor& cpu_result, double relative) {
  double error = relative_error(cuda_result, cpu_result);
  INFO("shape " << cpu_result.sizes() << " " << cpu_result.dtype() << ": relative error " << error << " (allowed "
                << relative << ")");
  CHECK(error <= relative);
}

void check_matches(const Tensor& cuda_result, const Tensor& cpu_result) {
  check_matches(cuda_result, cpu_result, tolerance(cpu_result.dtype()));
}

// a @ b on both devices, from the same CPU values; `view` turns each operand into the
// (possibly transposed or strided) view multiplied.
template <class View>
void check_product(const Tensor& a, const Tensor& b, View view) {
  Tensor expected = matmul(view(a, 0), view(b, 1));
  Tensor got = matmul(view(on_cuda(a), 0), view(on_cuda(b), 1));
  check_matches(got, expected);
}

void check_product(const Tensor& a, const Tensor& b) {
  check_product(a, b, [](const Tensor& x, int) { return x; });
}

// Restores TF32 to off however the test ends.
struct Tf32Off {
  ~Tf32Off() { cuda::set_allow_tf32(false); }
};

}  // namespace

TEST_CASE("cuda matmul of 2-D matrices with odd sizes matches the CPU", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {7, 13, 5}, {1, 1000, 7}, {64, 1000, 33}, {129, 7, 4097}, {1000, 1, 1}}) {
      INFO(dtype << " (" << m << ", " << k << ") @ (" << k << ", " << n << ")");
      check_product(normal({m, k}, dtype, 1 + m), normal({k, n}, dtype, 2 + n));
    }
  }
}

TEST_CASE("cuda matmul reads transposed and strided views in place or copies them", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // Stored transposed: (k, m) and (n, k), multiplied as their transposes.
    Tensor a_stored = normal({37, 21}, dtype, 3), b_stored = normal({45, 37}, dtype, 4);
    Tensor a_plain = normal({21, 37}, dtype, 5), b_plain = normal({37, 45}, dtype, 6);
    INFO(dtype);
    check_product(a_stored, b_plain, [](const Tensor& x, int which) { return which == 0 ? x.t() : x; });
    check_product(a_plain, b_stored, [](const Tensor& x, int which) { return which == 1 ? x.t() : x; });
    check_product(a_stored, b_stored, [](const Tensor& x, int) { return x.t(); });
    // Row stride > columns (a narrowed matrix) and neither stride 1 (every other column).
    Tensor wide = normal({21, 80}, dtype, 7);
    check_product(wide, b_plain, [](const Tensor& x, int which) { return which == 0 ? x.narrow(1, 5, 37) : x; });
    check_product(wide, b_plain,
                  [](const Tensor& x, int which) { return which == 0 ? x.slice(1, 0, 74, 2) : x; });
    Tensor tall = normal({74, 45}, dtype, 8);
    check_product(a_plain, tall, [](const Tensor& x, int which) { return which == 1 ? x.slice(0, 0, 74, 2) : x; });
  }
}

TEST_CASE("cuda batched and broadcast matmul, vectors, and empty products", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    check_product(normal({5, 17, 9}, dtype, 11), normal({5, 9, 23}, dtype, 12));   // batched
    check_product(normal({5, 17, 9}, dtype, 13), normal({9, 23}, dtype, 14));      // weight broadcast (stride 0)
    check_product(normal({17, 9}, dtype, 15), normal({5, 9, 23}, dtype, 16));      // left broadcast
    check_product(normal({2, 1, 17, 9}, dtype, 17), normal({3, 9, 23}, dtype, 18));  // 4-D broadcast
    check_product(normal({4, 9, 17}, dtype, 19), normal({4, 23, 9}, dtype, 20),
                  [](const Tensor& x, int) { return x.transpose(1, 2); });          // batched transposes
    // A broadcast operand with neither unit stride is copied once, not per batch.
    check_product(normal({5, 17, 9}, dtype, 21), normal({18, 46}, dtype, 22), [](const Tensor& x, int which) {
      return which == 1 ? x.slice(0, 0, 18, 2).slice(1, 0, 46, 2) : x;  // (9, 23), strides (92, 2)
    });
    check_product(normal({9}, dtype, 23), normal({9, 23}, dtype, 24));           // vector @ matrix
    check_product(normal({17, 9}, dtype, 25), normal({9}, dtype, 26));           // matrix @ vector
    check_product(normal({9}, dtype, 27), normal({9}, dtype, 28));               // dot
    check_product(normal({5, 17, 9}, dtype, 29), normal({9}, dtype, 30));        // batched matrix @ vector
  }
  // K == 0 gives zeros; M == 0 gives an empty result.
  Tensor zero_k = matmul(on_cuda(normal({4, 0}, DType::Float32, 31)), on_cuda(normal({0, 6}, DType::Float32, 32)));
  CHECK(zero_k.sizes() == Shape{4, 6});
  CHECK(host_values(zero_k) == std::vector<double>(24, 0.0));
  Tensor zero_m = matmul(on_cuda(normal({0, 5}, DType::Float32, 33)), on_cuda(normal({5, 6}, DType::Float32, 34)));
  CHECK(zero_m.sizes() == Shape{0, 6});
}

TEST_CASE("cuda matmul gradients match the CPU's, batched and broadcast", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (auto [a_sizes, b_sizes] : std::vector<std::pair<Shape, Shape>>{
             {{17, 9}, {9, 23}}, {{5, 17, 9}, {5, 9, 23}}, {{5, 17, 9}, {9, 23}}, {{17, 9}, {3, 9, 23}}}) {
      INFO(dtype << " " << a_sizes << " @ " << b_sizes);
      Tensor a = normal(a_sizes, dtype, 41), b = normal(b_sizes, dtype, 42);
      Tensor a_cpu = a.detach().requires_grad_(), b_cpu = b.detach().requires_grad_();
      Tensor a_gpu = on_cuda(a).requires_grad_(), b_gpu = on_cuda(b).requires_grad_();
      Tensor out_cpu = matmul(a_cpu, b_cpu);
      Tensor upstream = normal(out_cpu.sizes(), dtype, 43);
      Tensor out_gpu = matmul(a_gpu, b_gpu);
      check_matches(out_gpu, out_cpu);
      sum(mul(out_cpu, upstream)).backward();
      sum(mul(out_gpu, on_cuda(upstream))).backward();
      check_matches(a_gpu.grad(), a_cpu.grad());
      check_matches(b_gpu.grad(), b_cpu.grad());
    }
  }
}

TEST_CASE("cuda linear with bias, forward and backward, matches the CPU", "[cuda]") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& x_sizes : {Shape{37, 64}, Shape{4, 9, 64}, Shape{64}, Shape{4097, 64}}) {
      INFO(dtype << " input " << x_sizes);
      Tensor x = normal(x_sizes, dtype, 51), weight = normal({33, 64}, dtype, 52), bias = normal({33}, dtype, 53);
      Tensor x_cpu = x.detach().requires_grad_(), weight_cpu = weight.detach().requires_grad_();
      Tensor bias_cpu = bias.detach().requires_grad_();
      Tensor x_gpu = on_cuda(x).requires_grad_(), weight_gpu = on_cuda(weight).requires_grad_();
      Tensor bias_gpu = on_cuda(bias).requires_grad_();
      Tensor out_cpu = linear(x_cpu, weight_cpu, bias_cpu);
      Tensor out_gpu = linear(x_gpu, weight_gpu, bias_gpu);
      check_matches(out_gpu, out_cpu);
      Tensor upstream = normal(out_cpu.sizes(), dtype, 54);
      sum(mul(out_cpu, upstream)).backward();
      sum(mul(out_gpu, on_cuda(upstream))).backward();
      check_matches(x_gpu.grad(), x_cpu.grad());
      check_matches(weight_gpu.grad(), weight_cpu.grad());
      check_matches(bias_gpu.grad(), bias_cpu.grad());
    }
  }
}

namespace {

// `tensor`'s values in a fresh allocation on `device` that starts `offset` elements in, so
// the pointer is only element-aligned when offset is odd; contiguous.
Tensor at_offset(const Tensor& tensor, Device device, int64_t offset) {
  Tensor storage = empty({tensor.numel() + offset}, {.dtype = tensor.dtype(), .device = device});
  Tensor view = make_view(storage, tensor.sizes(), contiguous_strides(tensor.sizes()), offset);
  copy_across_devices(tensor, view);
  return view;
}

// kernels(device).linear_forward on copies of the operands at `offset` on that device.
Tensor linear_forward_on(Device device, const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t offset) {
  Tensor output = at_offset(zeros({x.sizes()[0], weight.sizes()[0]}, {.dtype = x.dtype()}), device, offset);
  kernels(device).linear_forward(at_offset(x, device, offset), at_offset(weight, device, offset),
                                 at_offset(bias, device, offset), output);
  return output;
}

}  // namespace

TEST_CASE("cuda linear_forward adds the bias in cuBLASLt's epilogue: every dtype, odd sizes, misaligned",
          "[cuda]") {
  // (rows, in, out): cuBLASLt sizes, odd ones, and the degenerate ones that take the
  // unfused path (a size-1 dim, an empty sum).
  std::vector<std::array<int64_t, 3>> shapes = {{37, 64, 33}, {4097, 64, 33}, {129, 255, 1000}, {2, 3, 2},
                                                {1, 64, 33},  {64, 1, 33},    {64, 33, 1},      {8, 0, 5}};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (auto [rows, in_features, out_features] : shapes) {
      for (int64_t offset : {0, 1}) {
        INFO(dtype << " rows " << rows << " in " << in_features << " out " << out_features << " offset " << offset);
        auto random = [&](const Shape& sizes, uint64_t seed) {
          return converted_copy(normal(sizes, DType::Float32, seed), dtype, Device::cpu());
        };
        Tensor x = random({rows, in_features}, 91 + rows), weight = random({out_features, in_features}, 92);
        Tensor bias = random({out_features}, 93);
        Tensor expected = linear_forward_on(Device::cpu(), x, weight, bias, 0);
        check_matches(linear_forward_on(Device::cuda(), x, weight, bias, offset), expected);
      }
    }
  }
}

TEST_CASE("cuda linear_forward honours the TF32 switch and shares the cuBLAS workspace", "[cuda]") {
  Tf32Off restore;
  Tensor x = normal({256, 512}, DType::Float32, 95), weight = normal({384, 512}, DType::Float32, 96);
  Tensor bias = normal({384}, DType::Float32, 97);
  // The reference in float64, rounded to float32.
  auto in_float64 = [](const Tensor& t) { return converted_copy(t, DType::Float64, Device::cpu()); };
  Tensor exact = converted_copy(linear_forward_on(Device::cpu(), in_float64(x), in_float64(weight),
                                                  in_float64(bias), 0),
                                DType::Float32, Device::cpu());
  double float32_error = relative_error(linear_forward_on(Device::cuda(), x, weight, bias, 0), exact);
  int64_t workspace = memory::snapshot(Device::cuda()).category(MemoryCategory::Workspace).current;
  cuda::set_allow_tf32(true);
  double tf32_error = relative_error(linear_forward_on(Device::cuda(), x, weight, bias, 0), exact);
  cuda::set_allow_tf32(false);
  INFO("float32 error " << float32_error << ", TF32 error " << tf32_error);
  CHECK(float32_error < 1e-5);
  CHECK(tf32_error < 1e-2);
  CHECK(tf32_error > float32_error);
  // cuBLASLt ran in the stream's cuBLAS workspace: no new WORKSPACE bytes.
  CHECK(workspace >= static_cast<int64_t>(cuda::blas_workspace_bytes(Device::cuda())));
  CHECK(memory::snapshot(Device::cuda()).category(MemoryCategory::Workspace).current == workspace);
}

TEST_CASE("cuda matmul of float16 and bfloat16 accumulates in float32", "[cuda]") {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    INFO(dtype);
    auto sixteen_bit = [&](const Shape& sizes, uint64_t seed) {
      return converted_copy(normal(sizes, DType::Float32, seed), dtype, Device::cpu());
    };
    check_product(sixteen_bit({64, 256}, 61), sixteen_bit({256, 48}, 62));
    check_product(sixteen_bit({3, 31, 77}, 63), sixteen_bit({77, 19}, 64));
    check_product(sixteen_bit({40, 64}, 65), sixteen_bit({24, 40}, 66),
                  [](const Tensor& x, int) { return x.t(); });
  }
}

TEST_CASE("cuda matmul's cuBLAS workspace is counted as WORKSPACE", "[cuda]") {
  Tensor product = matmul(on_cuda(normal({8, 8}, DType::Float32, 71)), on_cuda(normal({8, 8}, DType::Float32, 72)));
  (void)product;
  memory::Snapshot snapshot = memory::snapshot(Device::cuda());
  int64_t workspace = snapshot.category(MemoryCategory::Workspace).current;
  INFO("WORKSPACE bytes " << workspace);
  CHECK(workspace > 0);
  CHECK(workspace >= static_cast<int64_t>(cuda::blas_workspace_bytes(Device::cuda())));
  // Kept for the process: more products allocate no more workspace on the same stream.
  for (int i = 0; i < 3; ++i) {
    product = matmul(on_cuda(normal({64, 32}, DType::Float64, 73)), on_cuda(normal({32, 16}, DType::Float64, 74)));
  }
  CHECK(memory::snapshot(Device::cuda()).category(MemoryCategory::Workspace).current == workspace);
}

TEST_CASE("cuda float32 matmul is exact-ish unless TF32 is allowed", "[cuda]") {
  Tf32Off restore;
  REQUIRE_FALSE(cuda::allow_tf32());  // off by default, as in PyTorch
  Tensor a = normal({512, 512}, DType::Float32, 81), b = normal({512, 512}, DType::Float32, 82);
  // The reference in float64, rounded to float32.
  Tensor exact = converted_copy(matmul(converted_copy(a, DType::Float64, Device::cpu()),
                                       converted_copy(b, DType::Float64, Device::cpu())),
                                DType::Float32, Device::cpu());
  Tensor a_gpu = on_cuda(a), b_gpu = on_cuda(b);
  double float32_error = relative_error(matmul(a_gpu, b_gpu), exact);
  INFO("float32 error " << float32_error);
  CHECK(float32_error < 1e-5);

  cuda::set_allow_tf32(true);
  double tf32_error = relative_error(matmul(a_gpu, b_gpu), exact);
  cuda::set_allow_tf32(false);
  INFO("TF32 error " << tf32_error);
  CHECK(tf32_error < 1e-2);
  CHECK(tf32_error > float32_error);  // TF32 keeps 10 mantissa bits: visibly coarser
  CHECK(relative_error(matmul(a_gpu, b_gpu), exact) == float32_error);  // off again: the same result
}
