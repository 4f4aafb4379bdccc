// tests/distributed/mpi/test_zero_redundancy_optimizer.cpp — ZeRO-1 across 2 and 4 ranks
// against the plain optimizer run in the same process on the gradient averaged over
// ranks (float64, every rank's gradient known to every rank): SGD with momentum, Adam,
// AdamW with weight decay, Adagrad, on sizes that need padding; parameter groups with
// their own rates and a scheduler; gradients from backward against one process on the
// whole batch; OPTIMIZER_STATE per rank, exact bytes; checkpoints in the plain layout; and
// the errors, which every rank raises alike so that no rank is left waiting.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/loss.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/memory_format.h"
#include "memgrad/core/random.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/zero_redundancy_optimizer.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/sequential.h"
#include "memgrad/nn/linear.h"
#include "memgrad/optim/optim.h"

using mg::DType;
using mg::MemoryCategory;
using mg::Shape;
using mg::Tensor;
using mg::distributed::make_zero_redundancy_optimizer;
using mg::distributed::ZeroRedundancyOptimizer;
using Catch::Matchers::Contains;

namespace {

// A group of its own for these tests (every rank runs them in the same order).
std::shared_ptr<mg::distributed::ProcessGroup> zero_group() {
  static const std::shared_ptr<mg::distributed::ProcessGroup> group = mg::distributed::init_process_group();
  return group;
}
int world_size() { return zero_group()->size(); }
int my_rank() { return zero_group()->rank(); }

// 3*5 + 7 + 2*2*3 + 1 + 2*3*2*2 = 59 elements: padding for 2 and 4 ranks alike, shards that
// cut parameters, and one channels-last weight (its layout kept in the flat buffer).
const std::vector<Shape> kOddShapes = {{3, 5}, {7}, {2, 2, 3}, {1}, {2, 3, 2, 2}};

// float64 leaves, the same on every rank for the same seed; 4-d ones channels-last.
std::vector<Tensor> make_params(const std::vector<Shape>& shapes, uint64_t seed) {
  mg::Generator generator(seed);
  std::vector<Tensor> params;
  for (const Shape& shape : shapes) {
    Tensor param = mg::randn(shape, {.dtype = DType::Float64, .category = MemoryCategory::Parameter}, &generator);
    if (shape.size() == 4) param = mg::contiguous_copy(param, mg::MemoryFormat::ChannelsLast);
    params.push_back(param.requires_grad_());
  }
  return params;
}

// Rank `rank`'s gradient of parameter `index` at step `step`: known to every rank.
Tensor rank_gradient(int rank, int step, size_t index, const Tensor& param) {
  mg::Generator generator(1000 * step + 10 * index + rank + 1);
  return mg::randn(param.sizes(), {.dtype = DType::Float64, .category = MemoryCategory::Gradient}, &generator);
}

// What ReduceOp::Average gives every rank: the sum over ranks, divided by their number.
Tensor averaged_gradient(int step, size_t index, const Tensor& param) {
  mg::NoGradGuard no_grad;
  Tensor sum = rank_gradient(0, step, index, param);
  for (int rank = 1; rank < world_size(); ++rank) sum.add_(rank_gradient(rank, step, index, param));
  return sum.div_(world_size());
}

void require_close(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected, double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const std::vector<double> got = actual[i].to_vector<double>();
    const std::vector<double> want = expected[i].to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t e = 0; e < got.size(); ++e) {
      INFO("parameter " << i << " element " << e << " on rank " << my_rank());
      REQUIRE_THAT(got[e], Catch::Matchers::WithinAbs(want[e], tolerance));
    }
  }
}

// Every rank's values of every tensor, all-gathered and compared bit for bit with this rank's.
void require_identical_on_every_rank(const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor mine = mg::contiguous_copy(tensors[i].detach()).view({tensors[i].numel()});
    const Tensor all = mg::zeros({mine.numel() * world_size()}, {.dtype = mine.dtype()});
    zero_group()->all_gather(all, mine)->wait();
    const std::vector<double> values = all.to_vector<double>();
    const std::vector<double> own = mine.to_vector<double>();
    for (int rank = 0; rank < world_size(); ++rank) {
      for (size_t e = 0; e < own.size(); ++e) {
        INFO("parameter " << i << " element " << e << " of rank " << rank);
        REQUIRE(values[rank * own.size() + e] == own[e]);
      }
    }
  }
}

// `steps` steps: `zero` on this rank's gradients, `plain` on their average; `after_step`
// (a scheduler, say) after each pair.
void step_both(mg::optim::Optimizer& zero, const std::vector<Tensor>& zero_params, mg::optim::Optimizer& plain,
               const std::vector<Tensor>& plain_params, int steps, const std::function<void()>& after_step = {}) {
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < zero_params.size(); ++i) {
      zero_params[i].set_grad(rank_gradient(my_rank(), step, i, zero_params[i]));
      plain_params[i].set_grad(averaged_gradient(step, i, plain_params[i]));
    }
    zero.step();
    plain.step();
    if (after_step) after_step();
  }
}

template <class ShardOptimizer, class Options>
void require_steps_as_plain(const Options& options) {
  const std::vector<Tensor> zero_params = make_params(kOddShapes, 7);
  const std::vector<Tensor> plain_params = make_params(kOddShapes, 7);
  auto zero = make_zero_redundancy_optimizer<ShardOptimizer>(zero_group(), zero_params, options);
  ShardOptimizer plain(plain_params, options);
  const int64_t padded = (59 + world_size() - 1) / world_size() * world_size();
  CHECK(zero->layout(0).numel() == 59);
  CHECK(zero->layout(0).padded_numel() == padded);
  CHECK(zero->layout(0).shard_numel() == padded / world_size());
  step_both(*zero, zero_params, plain, plain_params, 5);
  require_close(zero_params, plain_params, 1e-12);
  require_identical_on_every_rank(zero_params);
}

int64_t category_bytes(MemoryCategory category) {
  return mg::allocator_for(mg::Device::cpu()).stats().category(category).current;
}

// A tensor whose storage claims to live on `device` (addresses without memory).
Tensor tensor_on(mg::Device device, std::unique_ptr<mg::CachingAllocator>& keep_allocator) {
  keep_allocator = std::make_unique<mg::CachingAllocator>(device,
                                                          std::make_unique<mg::SimulatedBackend>(size_t{64} << 20));
  auto storage = std::make_shared<mg::Storage>(4 * sizeof(double), *keep_allocator, MemoryCategory::Parameter);
  return Tensor(std::make_shared<mg::TensorImpl>(storage, Shape{4}, Shape{1}, 0, DType::Float64));
}

}  // namespace

TEST_CASE("ZeRO-1 steps as the plain optimizer on the averaged gradient, sizes that need padding", "[mpi][zero]") {
  SECTION("Adam") { require_steps_as_plain<mg::optim::Adam>(mg::optim::AdamOptions{.lr = 1e-2}); }
  SECTION("AdamW with weight decay and amsgrad") {
    require_steps_as_plain<mg::optim::AdamW>(
        mg::optim::AdamWOptions{.lr = 1e-2, .beta2 = 0.99, .weight_decay = 0.1, .amsgrad = true});
  }
  SECTION("SGD with momentum, dampening and weight decay") {
    require_steps_as_plain<mg::optim::SGD>(
        mg::optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  }
  SECTION("SGD with Nesterov momentum") {
    require_steps_as_plain<mg::optim::SGD>(mg::optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
  }
  SECTION("Adagrad") {
    require_steps_as_plain<mg::optim::Adagrad>(mg::optim::AdagradOptions{
        .lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1});
  }
}

TEST_CASE("ZeRO-1 keeps the parameters' identity, views them in one buffer, and starts from rank 0's", "[mpi][zero]") {
  mg::Generator generator(100 + my_rank());  // a different model on every rank
  auto model = std::make_shared<mg::nn::Linear>(6, 5, true, &generator);
  model->to(DType::Float64);
  const std::vector<Tensor> before = model->parameters();
  auto zero = make_zero_redundancy_optimizer<mg::optim::Adam>(zero_group(), model->parameters(),
                                                              mg::optim::AdamOptions{.lr = 1e-2});
  const std::vector<Tensor> after = model->parameters();
  const Tensor& flat = zero->layout(0).flat_parameters();
  REQUIRE(flat.memory_category() == MemoryCategory::Parameter);
  for (size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].is_same(before[i]));  // the module's own tensors, moved
    CHECK(after[i].storage() == flat.storage());
    CHECK(after[i].is_leaf());
    CHECK(after[i].requires_grad());
  }
  CHECK(after[0].storage_offset() == 0);
  CHECK(after[1].storage_offset() == 30);  // the bias follows the 5x6 weight
  require_identical_on_every_rank(after);  // rank 0's, broadcast

  // Gradients still reach the moved parameters through the module.
  Tensor input = mg::randn({3, 6}, {.dtype = DType::Float64}, &generator);
  (*model)(input).sum().backward();
  for (const Tensor& param : after) CHECK(param.grad().defined());
  zero->step();
  require_identical_on_every_rank(after);
}

TEST_CASE("ZeRO-1's OPTIMIZER_STATE per rank is 1/N of plain Adam's, exact bytes", "[mpi][zero]") {
  const int n = world_size();
  SECTION("64 elements: no padding") {
    const std::vector<Shape> shapes = {{8, 6}, {16}};
    const std::vector<Tensor> plain_params = make_params(shapes, 3);
    const std::vector<Tensor> zero_params = make_params(shapes, 3);
    mg::optim::Adam plain(plain_params, {.lr = 1e-3});
    auto zero = make_zero_redundancy_optimizer<mg::optim::Adam>(zero_group(), zero_params,
                                                                mg::optim::AdamOptions{.lr = 1e-3});
    const int64_t state_before = category_bytes(MemoryCategory::OptimizerState);
    for (size_t i = 0; i < plain_params.size(); ++i) plain_params[i].set_grad(averaged_gradient(0, i, plain_params[i]));
    plain.step();
    const int64_t plain_bytes = category_bytes(MemoryCategory::OptimizerState) - state_before;
    // Two float64 moments of 64 elements; a float32 step counter per parameter tensor.
    REQUIRE(plain_bytes == 2 * 64 * 8 + 2 * 4);

    const int64_t between = category_bytes(MemoryCategory::OptimizerState);
    for (size_t i = 0; i < zero_params.size(); ++i) {
      zero_params[i].set_grad(rank_gradient(my_rank(), 0, i, zero_params[i]));
    }
    zero->step();
    const int64_t zero_bytes = category_bytes(MemoryCategory::OptimizerState) - between;
    // The moments of 64 / n elements; one step counter for the group's shard.
    CHECK(zero_bytes == 2 * (64 / n) * 8 + 4);
    CHECK(zero_bytes - 4 == (plain_bytes - 2 * 4) / n);
    CHECK(zero->shard_optimizer().state_bytes() == zero_bytes);
    CHECK(zero->state_bytes() == 0);  // the state is the shard optimizer's
    zero->step();  // a second step allocates no more state
    CHECK(category_bytes(MemoryCategory::OptimizerState) - between == zero_bytes);
  }
  SECTION("17 elements: padded to a multiple of the ranks") {
    const std::vector<Shape> shapes = {{5, 3}, {2}};
    const int64_t padded = (17 + n - 1) / n * n;  // 18 for 2 ranks, 20 for 4
    const std::vector<Tensor> params = make_params(shapes, 4);
    const int64_t parameter_before = category_bytes(MemoryCategory::Parameter);
    auto zero = make_zero_redundancy_optimizer<mg::optim::Adam>(zero_group(), params,
                                                                mg::optim::AdamOptions{.lr = 1e-3});
    // The parameters' own bytes freed, the flat buffer with its padding taken.
    CHECK(category_bytes(MemoryCategory::Parameter) - parameter_before == (padded - 17) * 8);

    const int64_t state_before = category_bytes(MemoryCategory::OptimizerState);
    const int64_t gradient_before = category_bytes(MemoryCategory::Gradient);
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(rank_gradient(my_rank(), 0, i, params[i]));
    zero->step();
    CHECK(category_bytes(MemoryCategory::OptimizerState) - state_before == 2 * (padded / n) * 8 + 4);
    // The gradients now view one flat buffer, padding included; the shard's gradient is gone.
    CHECK(category_bytes(MemoryCategory::Gradient) - gradient_before == padded * 8);
    zero->zero_grad();  // set to none: the flat gradient buffer is freed
    CHECK(category_bytes(MemoryCategory::Gradient) == gradient_before);

    // Plain Adam on the same parameters, for the table in docs/zero.md.
    const std::vector<Tensor> plain_params = make_params(shapes, 4);
    mg::optim::Adam plain(plain_params, {.lr = 1e-3});
    for (size_t i = 0; i < plain_params.size(); ++i) plain_params[i].set_grad(averaged_gradient(0, i, plain_params[i]));
    const int64_t plain_before = category_bytes(MemoryCategory::OptimizerState);
    plain.step();
    CHECK(category_bytes(MemoryCategory::OptimizerState) - plain_before == 2 * 17 * 8 + 2 * 4);
  }
}

TEST_CASE("ZeRO-1 with parameter groups of their own rates, a scheduler and set_lr", "[mpi][zero]") {
  const std::vector<Shape> shapes = {{4, 3}, {5}, {7}};
  const std::vector<Tensor> zero_params = make_params(shapes, 11);
  const std::vector<Tensor> plain_params = make_params(shapes, 11);
  auto groups_of = [](const std::vector<Tensor>& params) {
    return std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>>{
        {{params[0], params[1]}, {.lr = 0.05, .weight_decay = 0.1}}, {{params[2]}, {.lr = 0.01, .weight_decay = 0}}};
  };
  auto zero = make_zero_redundancy_optimizer<mg::optim::AdamW>(zero_group(), groups_of(zero_params));
  mg::optim::AdamW plain(groups_of(plain_params));
  REQUIRE(zero->param_groups().size() == 2);
  CHECK(zero->param_groups()[1].lr == 0.01);
  CHECK(zero->hyper_parameters(0) == plain.hyper_parameters(0));

  mg::optim::StepLR zero_schedule(*zero, /*step_size=*/2, /*gamma=*/0.5);
  mg::optim::StepLR plain_schedule(plain, /*step_size=*/2, /*gamma=*/0.5);
  step_both(*zero, zero_params, plain, plain_params, 5, [&] {
    zero_schedule.step();
    plain_schedule.step();
  });
  CHECK(zero->param_groups()[0].lr == 0.05 * 0.25);  // epoch 5
  require_close(zero_params, plain_params, 1e-12);

  zero->set_group_lr(1, 0.2);
  plain.set_group_lr(1, 0.2);
  step_both(*zero, zero_params, plain, plain_params, 2);
  CHECK(zero->shard_optimizer().param_groups()[1].lr == 0.2);
  require_close(zero_params, plain_params, 1e-12);
  require_identical_on_every_rank(zero_params);
}

TEST_CASE("ZeRO-1 reads gradients already averaged (as by DistributedDataParallel) without reducing them again",
          "[mpi][zero]") {
  const std::vector<Tensor> zero_params = make_params(kOddShapes, 5);
  const std::vector<Tensor> plain_params = make_params(kOddShapes, 5);
  const mg::optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.05};
  auto zero = make_zero_redundancy_optimizer<mg::optim::AdamW>(zero_group(), zero_params, options,
                                                               {.gradients_already_reduced = true});
  mg::optim::AdamW plain(plain_params, options);
  for (int step = 0; step < 4; ++step) {
    std::vector<Tensor> gradients;
    for (size_t i = 0; i < zero_params.size(); ++i) {
      gradients.push_back(averaged_gradient(step, i, zero_params[i]));  // what DDP leaves in .grad
      zero_params[i].set_grad(gradients.back());
      plain_params[i].set_grad(averaged_gradient(step, i, plain_params[i]));
    }
    zero->step();
    plain.step();
    // The gradients are left as they were (they may be views of DDP's buckets).
    for (size_t i = 0; i < zero_params.size(); ++i) CHECK(zero_params[i].grad().is_same(gradients[i]));
  }
  require_close(zero_params, plain_params, 1e-12);
  require_identical_on_every_rank(zero_params);
}

TEST_CASE("ZeRO-1 on gradients from backward equals one process on the whole batch; they accumulate in the flat "
          "buffer", "[mpi][zero]") {
  auto make_model = [] {
    mg::Generator generator(21);
    auto model = std::make_shared<mg::nn::Sequential>(std::initializer_list<std::shared_ptr<mg::nn::Module>>{
        std::make_shared<mg::nn::Linear>(5, 7, true, &generator), std::make_shared<mg::nn::ReLU>(),
        std::make_shared<mg::nn::Linear>(7, 3, true, &generator)});
    model->to(DType::Float64);
    return model;
  };
  // Each rank's batch of 4, known to every rank; the whole batch is all of them in rank order.
  auto batch_of = [](int rank, int step) {
    mg::Generator generator(500 + 10 * step + rank);
    Tensor inputs = mg::randn({4, 5}, {.dtype = DType::Float64}, &generator);
    Tensor targets = mg::randn({4, 3}, {.dtype = DType::Float64}, &generator);
    return std::make_pair(inputs, targets);
  };
  auto zero_model = make_model();
  auto plain_model = make_model();
  const mg::optim::AdamWOptions options{.lr = 1e-2, .weight_decay = 0.1};
  auto zero = make_zero_redundancy_optimizer<mg::optim::AdamW>(zero_group(), zero_model->parameters(), options);
  mg::optim::AdamW plain(plain_model->parameters(), options);
  const std::vector<Tensor> params = zero_model->parameters();
  for (int step = 0; step < 4; ++step) {
    zero->zero_grad(/*set_to_none=*/false);  // keeps the gradients as views of the flat buffer
    plain.zero_grad();
    const auto [inputs, targets] = batch_of(my_rank(), step);
    mg::mse_loss((*zero_model)(inputs), targets).backward();
    std::vector<Tensor> all_inputs, all_targets;
    for (int rank = 0; rank < world_size(); ++rank) {
      const auto [rank_inputs, rank_targets] = batch_of(rank, step);
      all_inputs.push_back(rank_inputs);
      all_targets.push_back(rank_targets);
    }
    mg::mse_loss((*plain_model)(mg::cat(all_inputs)), mg::cat(all_targets)).backward();
    if (step > 0) {
      // Backward accumulated into the views the last step made: one buffer for all.
      for (const Tensor& param : params) CHECK(param.grad().storage() == params[0].grad().storage());
    }
    zero->step();
    plain.step();
  }
  require_close(params, plain_model->parameters(), 1e-12);
  require_identical_on_every_rank(params);
}

TEST_CASE("ZeRO-1's state dict is plain AdamW's on rank 0, and a plain state dict resumes it", "[mpi][zero]") {
  const std::vector<Shape> shapes = {{3, 5}, {7}, {2, 3, 2, 2}};
  auto groups_of = [](const std::vector<Tensor>& params) {
    return std::vector<mg::optim::ParamGroupOptions<mg::optim::AdamWOptions>>{
        {{params[0], params[2]}, {.lr = 0.02, .weight_decay = 0.1, .amsgrad = true}},
        {{params[1]}, {.lr = 0.01, .weight_decay = 0, .amsgrad = true}}};
  };
  const std::vector<Tensor> zero_params = make_params(shapes, 8);
  const std::vector<Tensor> plain_params = make_params(shapes, 8);
  auto zero = make_zero_redundancy_optimizer<mg::optim::AdamW>(zero_group(), groups_of(zero_params));
  mg::optim::AdamW plain(groups_of(plain_params));
  // The plain optimizer's parameters, in its group order, for rank_gradient's indices.
  const std::vector<Tensor> zero_order = {zero_params[0], zero_params[2], zero_params[1]};
  const std::vector<Tensor> plain_order = {plain_params[0], plain_params[2], plain_params[1]};
  step_both(*zero, zero_order, plain, plain_order, 3);
  zero->set_group_lr(0, 0.015);  // after the last step: the state dict has it all the same
  plain.set_group_lr(0, 0.015);

  const std::optional<mg::optim::OptimizerStateDict> consolidated = zero->consolidate_state_dict(0);
  REQUIRE(consolidated.has_value() == (my_rank() == 0));
  if (consolidated) {
    const mg::optim::OptimizerStateDict expected = mg::optim::state_dict(plain);
    CHECK(consolidated->kind == "AdamW");
    REQUIRE(consolidated->tensors.size() == expected.tensors.size());
    std::map<std::string, Tensor> by_name(consolidated->tensors.begin(), consolidated->tensors.end());
    for (const auto& [name, tensor] : expected.tensors) {
      INFO(name);
      REQUIRE(by_name.count(name) == 1);
      const Tensor& got = by_name.at(name);
      REQUIRE(got.sizes() == tensor.sizes());
      REQUIRE(got.dtype() == tensor.dtype());
      require_close({got}, {tensor}, 1e-12);
    }
    // A plain AdamW takes it whole: ZeRO's checkpoints are plain ones.
    const std::vector<Tensor> other_params = make_params(shapes, 8);
    mg::optim::AdamW other(groups_of(other_params));
    mg::optim::load_state_dict(other, *consolidated);
    CHECK(other.param_groups()[0].lr == 0.015);
  }

  // A new ZeRO run resumes from the plain optimizer's state and follows it on.
  const std::vector<Tensor> resumed_params = make_params(shapes, 8);
  {
    mg::NoGradGuard no_grad;
    for (size_t i = 0; i < shapes.size(); ++i) resumed_params[i].copy_(plain_params[i]);
  }
  auto resumed = make_zero_redundancy_optimizer<mg::optim::AdamW>(zero_group(), groups_of(resumed_params));
  resumed->load_state_dict(mg::optim::state_dict(plain));
  CHECK(resumed->param_groups()[0].lr == 0.015);
  const std::vector<Tensor> resumed_order = {resumed_params[0], resumed_params[2], resumed_params[1]};
  step_both(*resumed, resumed_order, plain, plain_order, 3);
  require_close(resumed_params, plain_params, 1e-12);
}

TEST_CASE("ZeRO-1's errors are raised on every rank alike, before any collective is left waiting", "[mpi][zero]") {
  SECTION("a parameter without a gradient") {
    const std::vector<Tensor> params = make_params({{3}, {4}}, 1);
    auto zero = make_zero_redundancy_optimizer<mg::optim::SGD>(zero_group(), params, mg::optim::SGDOptions{.lr = 0.1});
    params[0].set_grad(rank_gradient(my_rank(), 0, 0, params[0]));
    CHECK_THROWS_WITH(zero->step(), Contains("parameter 1 of group 0") && Contains("has no gradient"));
    // Nothing was started: the ranks are still in step.
    params[1].set_grad(rank_gradient(my_rank(), 0, 1, params[1]));
    zero->step();
    require_identical_on_every_rank(params);
  }
  SECTION("a model moved after the optimizer was built") {
    mg::Generator generator(3);
    auto model = std::make_shared<mg::nn::Linear>(2, 3, true, &generator);
    auto zero = make_zero_redundancy_optimizer<mg::optim::SGD>(zero_group(), model->parameters(),
                                                               mg::optim::SGDOptions{.lr = 0.1});
    model->to(DType::Float64);  // set_data: the parameters leave the flat buffer
    (*model)(mg::ones({1, 2}, {.dtype = DType::Float64})).sum().backward();
    CHECK_THROWS_WITH(zero->step(), Contains("parameter 0 of group 0") && Contains("no longer views"));
  }
  SECTION("ranks given different parameters") {
    // Rank 0 has a 4-element second parameter, the others a 5-element one (the same count
    // of parameters, so only the fingerprint tells).
    const std::vector<Tensor> params = make_params({{3}, {my_rank() == 0 ? 4 : 5}}, 1);
    CHECK_THROWS_WITH(
        make_zero_redundancy_optimizer<mg::optim::Adam>(zero_group(), params, mg::optim::AdamOptions{}),
        Contains("the ranks were given different parameters") &&
            Contains("rank 0: 1 groups, 2 parameters, 7 elements") &&
            Contains("rank 1: 1 groups, 2 parameters, 8 elements"));
    // Another group of parameters on rank 0 only.
    std::vector<std::vector<Tensor>> groups = {make_params({{3}}, 1)};
    if (my_rank() == 0) groups.push_back(make_params({{2}}, 1));
    auto sgd = [](const std::vector<Tensor>& shards) {
      auto optimizer = std::make_unique<mg::optim::SGD>(std::vector<Tensor>{shards[0]});
      for (size_t g = 1; g < shards.size(); ++g) optimizer->add_param_group({shards[g]}, {});
      return std::unique_ptr<mg::optim::Optimizer>(std::move(optimizer));
    };
    CHECK_THROWS_WITH(ZeroRedundancyOptimizer(zero_group(), groups, sgd),
                      Contains("rank 0: 2 groups, 2 parameters, 5 elements"));
    zero_group()->barrier()->wait();  // every rank got here: none waits for a lost collective
  }
  SECTION("parameters on different devices, or of two dtypes in a group") {
    std::unique_ptr<mg::CachingAllocator> allocator;
    const Tensor on_gpu = tensor_on(mg::Device::cuda(0), allocator);
    on_gpu.requires_grad_();
    const std::vector<Tensor> on_cpu = make_params({{3}}, 1);
    CHECK_THROWS_WITH(make_zero_redundancy_optimizer<mg::optim::Adam>(
                          zero_group(), std::vector<Tensor>{on_cpu[0], on_gpu}, mg::optim::AdamOptions{}),
                      Contains("parameter 1 of group 0") && Contains("not on the device of the first parameter"));
    Tensor single = mg::zeros({2}, {.dtype = DType::Float32}).requires_grad_();
    CHECK_THROWS_WITH(make_zero_redundancy_optimizer<mg::optim::Adam>(
                          zero_group(), std::vector<Tensor>{on_cpu[0], single}, mg::optim::AdamOptions{}),
                      Contains("does not have the dtype of the group's first parameter"));
  }
  SECTION("a shard optimizer that does not hold the shards") {
    const std::vector<Tensor> params = make_params({{3}}, 1);
    auto unrelated = [](const std::vector<Tensor>&) {
      return std::unique_ptr<mg::optim::Optimizer>(
          std::make_unique<mg::optim::SGD>(std::vector<Tensor>{mg::zeros({2}).requires_grad_()}));
    };
    CHECK_THROWS_WITH(ZeroRedundancyOptimizer(zero_group(), {params}, unrelated),
                      Contains("not shards[0] alone"));
  }
}
