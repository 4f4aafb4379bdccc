// tests/cuda/test_cuda_dependent_launch.cpp — kernels launched before the kernel ahead of
// them has finished (cuda::set_dependent_launch, cuda/kernels/dependent_launch.cuh) give
// the results of ordinary launches bit for bit: ResNet-18 training steps under float16
// autocast in channels_last (batch norm's passes after cuDNN's convolutions and after each
// other, pooling, the caching allocator handing freed blocks to the next kernel), and a
// chain of batch norms and poolings on one large tensor, where a kernel that read its
// input early would read the previous kernel's unfinished output. Below compute capability
// 9.0 both runs are ordinary launches, so each run also checks which kind it got.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/pool.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/cuda.h"
#include "memgrad/cuda/runtime.h"
#include "cuda/deterministic_convolutions.h"
#include "cuda/kernel_checks.h"
#include "cuda/resnet18_steps.h"

using namespace mg;
using namespace cuda_checks;
using mg_test::check_same;

namespace {

// Whether the test's GPU launches early when allowed: compute capability 9.0 or more.
bool launches_early_when_allowed() {
  int major = 0;
  MG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, kCuda.index));
  return major >= 9;
}

// Sets cuda::set_dependent_launch for a scope, and checks that kernels on the test's GPU
// are launched early exactly when allowed on a GPU that can (an H200 run thus proves the
// early path ran, not two runs of ordinary launches).
class DependentLaunch {
 public:
  explicit DependentLaunch(bool allow) : before_(cuda::dependent_launch()) {
    cuda::set_dependent_launch(allow);
    CHECK(cuda::launches_dependent(kCuda) == (allow && launches_early_when_allowed()));
  }
  ~DependentLaunch() { cuda::set_dependent_launch(before_); }
  DependentLaunch(const DependentLaunch&) = delete;
  DependentLaunch& operator=(const DependentLaunch&) = delete;

 private:
  bool before_;
};

std::vector<Tensor> trained_resnet18(bool dependent, int steps) {
  DependentLaunch launch(dependent);
  return mg_test::trained_resnet18(steps);
}

// Batch norm + ReLU and max pooling, forward and backward, `rounds` times over one large
// channels_last float16 tensor, each round's input the last round's output: the values
// after the chain, and the gradient of the first input.
std::vector<Tensor> batch_norm_chain(bool dependent, int rounds) {
  DependentLaunch launch(dependent);
  Generator generator(12);
  const Tensor first = randn({16, 64, 56, 56}, {}, &generator)
                           .to(kCuda)
                           .to(DType::Float16)
                           .contiguous(MemoryFormat::ChannelsLast)
                           .requires_grad_();
  const Tensor weight = (rand({64}, {}, &generator) + 0.5).to(kCuda).requires_grad_();
  const Tensor bias = randn({64}, {}, &generator).to(kCuda).requires_grad_();
  const Tensor running_mean = zeros({64}, {.device = kCuda}), running_var = ones({64}, {.device = kCuda});
  Pool2dOptions same_size;
  same_size.kernel_size = {3, 3};
  same_size.stride = {1, 1};
  same_size.padding = {1, 1};
  Tensor x = first;
  for (int i = 0; i < rounds; ++i) {
    x = max_pool2d(batch_norm_relu(x, running_mean, running_var, weight, bias, /*training=*/true, 0.1, 1e-5),
                   same_size);
  }
  x.sum().backward();
  return {x, running_mean, running_var, first.grad(), weight.grad(), bias.grad()};
}

}  // namespace

TEST_CASE("CUDA kernels launched early give ordinary launches' results: ResNet-18 steps under float16 autocast",
          "[cuda]") {
  mg_test::DeterministicConvolutions deterministic;
  const std::vector<Tensor> in_order = trained_resnet18(false, 3);
  check_same(trained_resnet18(false, 3), in_order, "two runs launched in order");  // the comparison is exact
  check_same(trained_resnet18(true, 3), in_order, "launched early against in order");
}

TEST_CASE("CUDA kernels launched early give ordinary launches' results: a chain of batch norms and poolings",
          "[cuda]") {
  const bool before = cuda::dependent_launch();
  const std::vector<Tensor> in_order = batch_norm_chain(false, 12);
  check_same(batch_norm_chain(true, 12), in_order, "launched early against in order");
  CHECK(cuda::dependent_launch() == before);  // each run's scope restored the setting
}
