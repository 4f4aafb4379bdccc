// tests/distributed/test_ddp_single_process.cpp — DistributedDataParallel in one process
// (SingleProcessGroup: a world of one, no MPI), in every build: the bucket layout and caps,
// gradients equal to plain training's and living in the buckets (also after zero_grad before
// or after forward), the exact GRADIENT and COMMUNICATION bytes, unused parameters, no_sync.
// Across processes: mpi/test_ddp.cpp.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "distributed/ddp_test_support.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/single_process_group.h"
#include "memgrad/memory/snapshot.h"

using mg::MemoryCategory;
using mg::Tensor;
using mg::distributed::DistributedDataParallel;
using mg::distributed::SingleProcessGroup;
using namespace mg_test::ddp;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<DistributedDataParallel> wrap(std::shared_ptr<mg::nn::Module> model,
                                              const mg::distributed::DistributedDataParallelOptions& options = {}) {
  return std::make_shared<DistributedDataParallel>(std::move(model), std::make_shared<SingleProcessGroup>(),
                                                   options);
}

int64_t category_bytes(MemoryCategory category) { return mg::memory::snapshot().category(category).current; }
int64_t category_peak(MemoryCategory category) { return mg::memory::snapshot().category(category).peak; }

int64_t bytes_of(const std::vector<Tensor>& tensors) {
  int64_t bytes = 0;
  for (const Tensor& tensor : tensors) bytes += static_cast<int64_t>(tensor.nbytes());
  return bytes;
}

// Every parameter's .grad is its view into its bucket: the bucket's parameters share one
// storage of the bucket's bytes, end to end in the layout's order.
void check_gradients_are_bucket_views(const DistributedDataParallel& ddp) {
  const mg::nn::NamedTensors parameters = ddp.module().named_parameters();
  auto parameter_named = [&](const std::string& name) {
    for (const auto& [candidate, tensor] : parameters) {
      if (candidate == name) return tensor;
    }
    FAIL("no parameter " << name);
    return Tensor();
  };
  for (const mg::distributed::BucketLayout& bucket : ddp.bucket_layout()) {
    const Tensor first = parameter_named(bucket.parameter_names.front()).grad();
    REQUIRE(first.defined());
    CHECK(first.storage()->nbytes() == static_cast<size_t>(bucket.bytes));
    CHECK(first.memory_category() == MemoryCategory::Gradient);
    int64_t offset = 0;
    for (const std::string& name : bucket.parameter_names) {
      const Tensor grad = parameter_named(name).grad();
      CHECK(grad.storage() == first.storage());
      CHECK(grad.storage_offset() == offset);
      offset += grad.numel();
    }
  }
}

}  // namespace

TEST_CASE("DDP buckets: last registered first, closed once they reach their cap", "[distributed][ddp]") {
  auto ddp = wrap(mlp(1), {.first_bucket_bytes = 400, .bucket_bytes = 1000});
  const std::vector<mg::distributed::BucketLayout> layout = ddp->bucket_layout();
  REQUIRE(layout.size() == 3);
  // 24 + 384 = 408 reaches the first cap (400); 128 + 2048 passes the next (1000) by its
  // last parameter; 128 + 768 = 896 stays under it, the last bucket.
  CHECK(layout[0].parameter_names == std::vector<std::string>{"4.bias", "4.weight"});
  CHECK(layout[0].bytes == 408);
  CHECK(layout[1].parameter_names == std::vector<std::string>{"2.bias", "2.weight"});
  CHECK(layout[1].bytes == 2176);
  CHECK(layout[2].parameter_names == std::vector<std::string>{"0.bias", "0.weight"});
  CHECK(layout[2].bytes == 896);
  CHECK(layout[0].dtype == mg::DType::Float64);
  CHECK(ddp->bucket_layout_str() ==
        "bucket 0: 408 bytes float64: 4.bias 4.weight\n"
        "bucket 1: 2176 bytes float64: 2.bias 2.weight\n"
        "bucket 2: 896 bytes float64: 0.bias 0.weight\n");

  // PyTorch's caps (1 MiB first): the whole MLP is one bucket.
  auto default_caps = wrap(mlp(1));
  REQUIRE(default_caps->bucket_layout().size() == 1);
  CHECK(default_caps->bucket_layout()[0].bytes == 3480);
  CHECK(default_caps->str().find("DistributedDataParallel(\n  world_size=1, backend=single-process, buckets=1\n  (module): Sequential(") == 0);
  CHECK(default_caps->named_parameters().front().first == "module.0.weight");
}

TEST_CASE("assign_buckets: one bucket per dtype at a time, a large parameter alone, reduction order",
          "[distributed][ddp]") {
  using mg::DType;
  const std::vector<Tensor> parameters = {
      mg::empty({100}, {.dtype = DType::Float32}),  // 400 bytes
      mg::empty({10}, {.dtype = DType::Float64}),   // 80
      mg::empty({300}, {.dtype = DType::Float32}),  // 1200
      mg::empty({200}, {.dtype = DType::Float64}),  // 1600
      mg::empty({5}, {.dtype = DType::Float64}),    // 40
  };
  // From the last: [4, 3] reaches the float64 first cap; [2] alone passes the float32 one;
  // then 80 and 400 bytes stay open under the later caps, ordered by their first parameter.
  const auto buckets = mg::distributed::assign_buckets(parameters, {.first_bucket_bytes = 1000, .bucket_bytes = 1000});
  CHECK(buckets == std::vector<std::vector<size_t>>{{4, 3}, {2}, {1}, {0}});
  CHECK(mg::distributed::assign_buckets(parameters, {.first_bucket_bytes = 1 << 20, .bucket_bytes = 1 << 20}) ==
        std::vector<std::vector<size_t>>{{4, 3, 1}, {2, 0}});
  CHECK_THROWS_WITH(mg::distributed::assign_buckets(parameters, {.first_bucket_bytes = 0, .bucket_bytes = 1}),
                    Contains("bucket caps must be positive"));
}

TEST_CASE("DDP over one process: the gradients of plain training, held in the buckets", "[distributed][ddp]") {
  auto ddp = wrap(mlp(7), {.first_bucket_bytes = 400, .bucket_bytes = 1000});
  auto reference = mlp(7);
  const Batch batch = draw_batch(8, 11, mlp_input);

  loss_of(*ddp, batch).backward();
  loss_of(*reference, batch).backward();
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) == 0.0);
  check_gradients_are_bucket_views(*ddp);
  const auto bucket_storage = ddp->module().parameters().front().grad().storage();

  // zero_grad (set to none) before forward: the forward makes the views again.
  ddp->zero_grad();
  reference->zero_grad();
  CHECK_FALSE(ddp->module().parameters().front().grad().defined());
  loss_of(*ddp, batch).backward();
  loss_of(*reference, batch).backward();
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) == 0.0);
  check_gradients_are_bucket_views(*ddp);
  CHECK(ddp->module().parameters().front().grad().storage() == bucket_storage);

  // zero_grad between forward and backward: the new gradients are copied into the bucket.
  Tensor loss = loss_of(*ddp, batch);
  ddp->zero_grad();
  loss.backward();
  reference->zero_grad();
  loss_of(*reference, batch).backward();
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) == 0.0);
  check_gradients_are_bucket_views(*ddp);
  CHECK(ddp->module().parameters().front().grad().storage() == bucket_storage);
}

TEST_CASE("DDP memory: the buckets are the GRADIENT bytes, the broadcast staging the only COMMUNICATION",
          "[distributed][ddp]") {
  auto model = resnet(3);
  const std::vector<Tensor> parameters = model->parameters();
  const std::vector<Tensor> buffers = model->buffers();
  std::vector<Tensor> state = parameters;
  state.insert(state.end(), buffers.begin(), buffers.end());
  // Float64 parameters and running statistics go in one staging tensor; the three int64
  // num_batches_tracked in another (3 x 8 bytes).
  REQUIRE(mg::distributed::coalesced_staging_bytes(state) == bytes_of(state));
  REQUIRE(mg::distributed::coalesced_staging_bytes(buffers) == bytes_of(buffers));

  const int64_t gradient_before = category_bytes(MemoryCategory::Gradient);
  REQUIRE(category_bytes(MemoryCategory::Communication) == 0);
  mg::memory::reset_peak_stats();
  auto ddp = wrap(model);
  // Construction: one staging copy of every parameter and buffer, freed; buckets of exactly
  // the parameters' bytes, tagged GRADIENT.
  CHECK(category_peak(MemoryCategory::Communication) == bytes_of(state));
  CHECK(category_bytes(MemoryCategory::Communication) == 0);
  CHECK(category_bytes(MemoryCategory::Gradient) - gradient_before == bytes_of(parameters));

  // A training forward stages the buffers; backward adds no GRADIENT (the gradients are
  // the buckets) and no COMMUNICATION (the all_reduce works in place).
  const Batch batch = draw_batch(4, 5, image_input);
  mg::memory::reset_peak_stats();
  Tensor loss = loss_of(*ddp, batch);
  CHECK(category_peak(MemoryCategory::Communication) == bytes_of(buffers));
  mg::memory::reset_peak_stats();
  loss.backward();
  CHECK(category_peak(MemoryCategory::Communication) == 0);
  CHECK(category_peak(MemoryCategory::Gradient) - gradient_before == bytes_of(parameters));
  CHECK(category_bytes(MemoryCategory::Gradient) - gradient_before == bytes_of(parameters));

  // No training forward (grad mode off): nothing broadcast.
  mg::memory::reset_peak_stats();
  {
    mg::NoGradGuard no_grad;
    (*ddp)(batch.input);
  }
  CHECK(category_peak(MemoryCategory::Communication) == 0);
}

namespace {

// A model whose forward leaves one of its two layers out.
class TwoHeads : public mg::nn::Module {
 public:
  explicit TwoHeads(mg::Generator& generator) : Module("TwoHeads") {
    used = register_module("used", std::make_shared<mg::nn::Linear>(6, kClasses, true, &generator));
    unused = register_module("unused", std::make_shared<mg::nn::Linear>(6, kClasses, true, &generator));
    to(mg::DType::Float64);
  }
  Tensor forward(const Tensor& input) override { return (*used)(input); }

  std::shared_ptr<mg::nn::Linear> used;
  std::shared_ptr<mg::nn::Linear> unused;
};

}  // namespace

TEST_CASE("DDP: a parameter without a gradient is an error naming it, unless find_unused_parameters",
          "[distributed][ddp]") {
  mg::Generator generator(4);
  const Batch batch = draw_batch(4, 6, mlp_input);
  auto ddp = wrap(std::make_shared<TwoHeads>(generator));
  CHECK_THROWS_WITH(loss_of(*ddp, batch).backward(),
                    Contains("2 of 4 parameters received no gradient in this backward on rank 0: unused.weight, "
                             "unused.bias") &&
                        Contains("find_unused_parameters = true"));
  // The next step starts afresh (and fails the same way).
  CHECK_THROWS_WITH(loss_of(*ddp, batch).backward(), Contains("unused.weight"));

  auto model = std::make_shared<TwoHeads>(generator);
  auto allowed = wrap(model, {.find_unused_parameters = true});
  loss_of(*allowed, batch).backward();
  for (const Tensor& parameter : model->unused->parameters()) {
    REQUIRE(parameter.grad().defined());
    CHECK(parameter.grad().abs().max().item<double>() == 0.0);
  }
  CHECK(model->used->weight.grad().abs().max().item<double>() > 0.0);
  check_gradients_are_bucket_views(*allowed);
}

TEST_CASE("DDP no_sync: gradients accumulate locally, the next synchronising backward reduces the sum",
          "[distributed][ddp]") {
  auto ddp = wrap(mlp(9));
  auto reference = mlp(9);
  const Batch batch = draw_batch(12, 13, mlp_input);
  for (int micro = 0; micro < 3; ++micro) {
    const Batch part = batch.rows(4 * micro, 4);
    if (micro < 2) {
      auto guard = ddp->no_sync();
      loss_of(*ddp, part).backward();
    } else {
      loss_of(*ddp, part).backward();
    }
    loss_of(*reference, part).backward();
  }
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) < 1e-15);
  check_gradients_are_bucket_views(*ddp);
}
