// tests/cuda/test_cuda_ddp_nccl.cpp — DistributedDataParallel and ZeRO-1 end to end over the
// NCCL backend on one GPU (a world of one: NCCL refuses two ranks on one GPU). With one
// rank an average is the value itself, so N steps through DDP (gradients in NCCL-reduced
// bucket views) and through ZeroRedundancyOptimizer (reduce_scatter, shard step,
// all_gather) must leave the parameters bit for bit where plain training leaves them.
// The arithmetic across ranks is tested under mpirun on the CPU (tests/distributed/mpi/)
// and, on a machine with several GPUs, by test_cuda_nccl_multi_rank.cpp.
#include <catch2/catch.hpp>

#if defined(MG_WITH_NCCL)

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/deterministic_convolutions.h"
#include "cuda/kernel_checks.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"
#include "memgrad/nn/nn.h"
#include "memgrad/optim/optim.h"

namespace {

using cuda_checks::check_equal;
using mg::Device;
using mg::Tensor;

constexpr int kSteps = 4;

std::shared_ptr<mg::distributed::ProcessGroup> nccl_world_of_one() {
  return mg::distributed::init_process_group({.backend = mg::distributed::Backend::Nccl});
}

// A small CNN with batch norm (buffers broadcast by every training forward), on the GPU.
std::shared_ptr<mg::nn::Module> model_on_gpu() {
  mg::Generator generator(11);
  auto model = std::make_shared<mg::nn::Sequential>(
      std::make_shared<mg::nn::Conv2d>(3, 8, 3, mg::Conv2dOptions{.padding = {1, 1}}, false, &generator),
      std::make_shared<mg::nn::BatchNorm2d>(8), std::make_shared<mg::nn::ReLU>(), std::make_shared<mg::nn::Flatten>(),
      std::make_shared<mg::nn::Linear>(8 * 6 * 6, 10, true, &generator));
  model->to(Device::cuda());
  return model;
}

struct Batch {
  Tensor input, target;
};
std::vector<Batch> batches() {
  mg::Generator generator(12);
  std::vector<Batch> result;
  for (int i = 0; i < kSteps; ++i) {
    result.push_back({mg::randn({16, 3, 6, 6}, {.device = Device::cuda()}, &generator),
                      mg::randint(0, 10, {16}, {.dtype = mg::DType::Int64}, &generator).to(Device::cuda())});
  }
  return result;
}

void train(mg::nn::Module& model, mg::optim::Optimizer& optimizer) {
  for (const Batch& batch : batches()) {
    optimizer.zero_grad();
    mg::cross_entropy(model(batch.input), batch.target).backward();
    optimizer.step();
  }
}

void check_same_parameters(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                           const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) check_equal(actual[i], expected[i], what + ": parameter " + std::to_string(i));
}

}  // namespace

TEST_CASE("DDP over NCCL, a world of one: steps equal plain training's bit for bit, gradients in the buckets",
          "[cuda][nccl][ddp]") {
  mg_test::DeterministicConvolutions deterministic;
  auto plain = model_on_gpu();
  mg::optim::SGD plain_optimizer(plain->parameters(), {.lr = 0.05, .momentum = 0.9});
  train(*plain, plain_optimizer);

  auto ddp = std::make_shared<mg::distributed::DistributedDataParallel>(
      model_on_gpu(), nccl_world_of_one(), mg::distributed::DistributedDataParallelOptions{.first_bucket_bytes = 512});
  REQUIRE(ddp->bucket_layout().size() >= 2);  // several buckets: each reduced as its gradients arrive
  mg::optim::SGD ddp_optimizer(ddp->parameters(), {.lr = 0.05, .momentum = 0.9});
  train(*ddp, ddp_optimizer);

  check_same_parameters(ddp->module().parameters(), plain->parameters(), "DDP against plain SGD");
  const std::vector<Tensor> buffers = ddp->module().buffers(), plain_buffers = plain->buffers();
  for (size_t i = 0; i < buffers.size(); ++i) check_equal(buffers[i], plain_buffers[i], "buffer " + std::to_string(i));
  // The gradients live in the buckets: views of a few large storages, not one each.
  const std::vector<Tensor> parameters = ddp->parameters();
  CHECK(parameters.front().grad().storage() == parameters[1].grad().storage());
}

TEST_CASE("ZeRO-1 over NCCL, a world of one: AdamW steps equal plain AdamW's bit for bit", "[cuda][nccl][zero]") {
  mg_test::DeterministicConvolutions deterministic;
  const mg::optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  auto plain = model_on_gpu();
  mg::optim::AdamW plain_optimizer(plain->parameters(), options);
  train(*plain, plain_optimizer);

  auto sharded = model_on_gpu();
  auto zero = mg::distributed::make_zero_redundancy_optimizer<mg::optim::AdamW>(nccl_world_of_one(),
                                                                                 sharded->parameters(), options);
  train(*sharded, *zero);
  check_same_parameters(sharded->parameters(), plain->parameters(), "ZeRO-1 against plain AdamW");
}

#else

TEST_CASE("DDP and ZeRO-1 over NCCL need NCCL", "[cuda][nccl]") { SUCCEED("built without NCCL: nothing to test"); }

#endif  // MG_WITH_NCCL
