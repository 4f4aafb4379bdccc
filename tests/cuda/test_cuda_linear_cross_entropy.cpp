// tests/cuda/test_cuda_linear_cross_entropy.cpp — linear_cross_entropy on a GPU against
// the CPU on the same random inputs: float32, and bfloat16/float16 under autocast, several
// chunkings with a short last chunk, ignored targets and label smoothing; its loss and both
// gradients. And matmul_into's float32 accumulation of 16-bit products.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/linear_cross_entropy.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"
#include "cuda/kernel_checks.h"

using namespace mg;
using namespace cuda_checks;

TEST_CASE("cuda matmul_into writes and accumulates 16-bit products in float32 as the CPU",
          "[cuda][linear_cross_entropy]") {
  for (DType dtype : {DType::BFloat16, DType::Float16, DType::Float32}) {
    INFO(dtype);
    // (1, 300, 70) @ (1, 70, 130): a transposed right operand, as the weight gradient's.
    Tensor a = random_values({1, 300, 70}, dtype, 1), b_stored = random_values({1, 130, 70}, dtype, 2);
    Tensor b = make_view(b_stored, {1, 70, 130}, {0, 1, 70}, 0);
    Tensor b_gpu_stored = b_stored.to(kCuda);
    Tensor b_gpu = make_view(b_gpu_stored, {1, 70, 130}, {0, 1, 70}, b_gpu_stored.storage_offset());
    Tensor out_cpu = random_values({1, 300, 130}, DType::Float32, 3), out_gpu = out_cpu.to(kCuda);
    for (bool accumulate : {true, false}) {
      cpu_kernels().matmul_into(a, b, out_cpu, accumulate);
      gpu_kernels().matmul_into(a.to(kCuda), b_gpu, out_gpu, accumulate);
      check_within_scale(out_gpu, out_cpu, 1e-5, accumulate ? "accumulated" : "written");
    }
  }
}

TEST_CASE("cuda linear_cross_entropy matches the CPU in float32 and under 16-bit autocast",
          "[cuda][linear_cross_entropy]") {
  const int64_t rows = 300, features = 64, classes = 1000;
  Tensor hidden = random_normal({rows, features}, DType::Float32, 11);
  Tensor weight = random_normal({classes, features}, DType::Float32, 12, 0.2);
  Generator generator(13);
  std::vector<int64_t> labels = randint(0, classes, {rows}, {.dtype = DType::Int64}, &generator).to_vector<int64_t>();
  for (int64_t n = 0; n < rows; n += 7) labels[n] = -100;
  Tensor target = from_vector(labels);
  for (DType autocast_dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    // One chunk, or (float32) 7 chunks of 43 rows, the last one 42; (16-bit) 4 of 75.
    for (int64_t chunk_bytes : {int64_t{1} << 30, int64_t{43} * classes * 4}) {
      for (double smoothing : {0.0, 0.1}) {
        INFO(autocast_dtype << " chunk_bytes " << chunk_bytes << " smoothing " << smoothing);
        Tensor h_cpu = hidden.detach().requires_grad_(), w_cpu = weight.detach().requires_grad_();
        Tensor h_gpu = hidden.to(kCuda).requires_grad_(), w_gpu = weight.to(kCuda).requires_grad_();
        Tensor loss_cpu, loss_gpu;
        CrossEntropyOptions options{.label_smoothing = smoothing};
        {
          std::optional<amp::AutocastGuard> cpu_autocast, gpu_autocast;
          if (autocast_dtype != DType::Float32) {
            cpu_autocast.emplace(autocast_dtype, DeviceType::CPU);
            gpu_autocast.emplace(autocast_dtype, DeviceType::CUDA);
          }
          loss_cpu = linear_cross_entropy(h_cpu, w_cpu, target, options, chunk_bytes);
          loss_gpu = linear_cross_entropy(h_gpu, w_gpu, target.to(kCuda), options, chunk_bytes);
        }
        const double tolerance = autocast_dtype == DType::Float32 ? 1e-5 : 2e-2;
        check_close(loss_gpu, loss_cpu, tolerance, "loss");
        loss_cpu.backward();
        loss_gpu.backward();
        check_within_scale(h_gpu.grad(), h_cpu.grad(), tolerance, "hidden's gradient");
        check_within_scale(w_gpu.grad(), w_cpu.grad(), tolerance, "weight's gradient");
      }
    }
  }
}
