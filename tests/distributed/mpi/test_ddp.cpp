// tests/distributed/mpi/test_ddp.cpp — DistributedDataParallel across 2 and 4 processes
// (mpirun, tests/CMakeLists.txt), in float64 against one process that sees the whole batch:
// the gradients of an MLP, a CNN and a ResNet-like net with batch norm; parameters after
// steps of SGD and Adam (equal on every rank, bit for bit, and to one process's); no_sync
// accumulation; layers under mg::checkpoint; unused parameters (the error, and
// find_unused_parameters with ranks that use different parameters); the construction's
// broadcast and its COMMUNICATION bytes.
//
// Every rank draws the same global batch from one seed and trains on its rows; the
// reference, computed on every rank alone, is plain training on a copy of rank 0's model.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "distributed/ddp_test_support.h"
#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/optim/adam.h"
#include "memgrad/optim/sgd.h"

using mg::Tensor;
using mg::distributed::DistributedDataParallel;
using mg::distributed::DistributedDataParallelOptions;
using namespace mg_test::ddp;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kRowsPerRank = 4;
constexpr double kTolerance = 1e-12;  // float64: sums taken in another order

std::shared_ptr<mg::distributed::ProcessGroup> ddp_group() {
  static const std::shared_ptr<mg::distributed::ProcessGroup> group = mg::distributed::init_process_group();
  return group;
}
int rank() { return ddp_group()->rank(); }
int world_size() { return ddp_group()->size(); }

std::shared_ptr<DistributedDataParallel> wrap(std::shared_ptr<mg::nn::Module> model,
                                              const DistributedDataParallelOptions& options = {}) {
  return std::make_shared<DistributedDataParallel>(std::move(model), ddp_group(), options);
}

// A copy of the wrapped model's (rank 0's) values, trained in this process alone.
std::shared_ptr<mg::nn::Module> reference_of(const DistributedDataParallel& ddp, const ModelFactory& factory) {
  auto reference = factory(12345);
  reference->load_state_dict(ddp.module().state_dict());
  return reference;
}

// True (on every rank) when every rank holds rank 0's values bit for bit.
bool same_on_every_rank(const std::vector<double>& values) {
  Tensor mine = mg::from_vector(values, {static_cast<int64_t>(values.size())});
  Tensor rank0 = mine.clone();
  ddp_group()->broadcast(rank0, 0)->wait();
  const double differs = mg::sub(mine, rank0).abs().max().item<double>() == 0.0 ? 0.0 : 1.0;
  Tensor ranks_that_differ = mg::from_vector(std::vector<double>{differs}, {1});
  ddp_group()->all_reduce(ranks_that_differ, mg::distributed::ReduceOp::Sum)->wait();
  return ranks_that_differ.item<double>() == 0.0;
}

// DDP's gradients after one step against plain training on the whole batch (each rank's
// rows averaged by the mean, as the ranks' means are averaged). Several buckets (small
// caps) and PyTorch's caps (one bucket for these models).
void check_gradients_equal_whole_batch(const ModelFactory& factory,
                                       const std::function<Tensor(int64_t, mg::Generator&)>& input) {
  for (const int64_t cap : {int64_t{256}, int64_t{25} << 20}) {
    auto ddp = wrap(factory(100 + rank()), {.first_bucket_bytes = cap, .bucket_bytes = 4 * cap});
    auto reference = reference_of(*ddp, factory);
    const Batch batch = draw_batch(kRowsPerRank * world_size(), 21, input);
    loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
    loss_of(*reference, batch).backward();
    INFO("first bucket cap " << cap << ", " << ddp->bucket_layout().size() << " buckets");
    CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) < kTolerance);
  }
}

}  // namespace

TEST_CASE("DDP starts every rank from rank 0's parameters and buffers", "[ddp]") {
  auto ddp = wrap(resnet(100 + rank()));  // each rank initialised differently
  CHECK(flat_state(ddp->module()) == flat_state(*resnet(100)));
}

TEST_CASE("DDP gradients equal one process's on the whole batch: MLP", "[ddp]") {
  check_gradients_equal_whole_batch(mlp, mlp_input);
}

TEST_CASE("DDP gradients equal one process's on the whole batch: CNN", "[ddp]") {
  check_gradients_equal_whole_batch(cnn, image_input);
}

TEST_CASE("DDP gradients with batch norm equal the average of each rank's batch run alone", "[ddp]") {
  // NOTE: each rank's batch norm normalises its own rows (PyTorch's DDP without
  // SyncBatchNorm), so the reference is not one pass over the whole batch: it runs each
  // rank's rows separately through one model, accumulating, and divides by the rank count.
  auto ddp = wrap(resnet(100 + rank()), {.first_bucket_bytes = 256, .bucket_bytes = 1024});
  auto reference = reference_of(*ddp, resnet);
  const Batch batch = draw_batch(kRowsPerRank * world_size(), 22, image_input);
  loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
  for (int r = 0; r < world_size(); ++r) loss_of(*reference, batch.rows(kRowsPerRank * r, kRowsPerRank)).backward();
  for (const Tensor& parameter : reference->parameters()) parameter.grad().div_(world_size());
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) < kTolerance);
  // The running statistics are each rank's own until a forward with grad mode on
  // broadcasts rank 0's (in eval mode here, so that batch norm leaves them as they come).
  const bool one_rank = world_size() == 1;
  CHECK(same_on_every_rank(flat_state(ddp->module())) == one_rank);
  ddp->eval();
  {
    mg::NoGradGuard no_grad;  // an evaluation forward sends nothing
    (*ddp)(batch.input);
  }
  CHECK(same_on_every_rank(flat_state(ddp->module())) == one_rank);
  (*ddp)(batch.input);
  CHECK(same_on_every_rank(flat_state(ddp->module())));
}

TEST_CASE("DDP training: parameters equal on every rank, and to one process's, after steps of SGD and Adam",
          "[ddp]") {
  for (const bool adam : {false, true}) {
    auto ddp = wrap(mlp(100 + rank()), {.first_bucket_bytes = 256, .bucket_bytes = 1024});
    auto reference = reference_of(*ddp, mlp);
    auto make_optimizer = [&](std::vector<Tensor> parameters) -> std::unique_ptr<mg::optim::Optimizer> {
      if (adam) return std::make_unique<mg::optim::Adam>(std::move(parameters), mg::optim::AdamOptions{.lr = 1e-2});
      return std::make_unique<mg::optim::SGD>(std::move(parameters), mg::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    };
    auto optimizer = make_optimizer(ddp->parameters());
    auto reference_optimizer = make_optimizer(reference->parameters());
    for (int step = 0; step < 5; ++step) {
      const Batch batch = draw_batch(kRowsPerRank * world_size(), 100 + step, mlp_input);
      optimizer->zero_grad();
      loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
      optimizer->step();
      reference_optimizer->zero_grad();
      loss_of(*reference, batch).backward();
      reference_optimizer->step();
    }
    INFO((adam ? "Adam" : "SGD with momentum"));
    CHECK(same_on_every_rank(flat_state(ddp->module())));
    CHECK(max_difference(ddp->module().parameters(), reference->parameters()) < 1e-10);
  }
}

TEST_CASE("DDP no_sync: three micro-batches accumulated equal one batch of all of them", "[ddp]") {
  auto ddp = wrap(cnn(100 + rank()), {.first_bucket_bytes = 256, .bucket_bytes = 1024});
  auto reference = reference_of(*ddp, cnn);
  constexpr int kMicroBatches = 3;
  const Batch batch = draw_batch(kRowsPerRank * world_size() * kMicroBatches, 23, image_input);
  for (int micro = 0; micro < kMicroBatches; ++micro) {
    // Micro-batch k of rank r: rows of the k-th third of the batch, that third split by rank.
    const Batch part = batch.rows((micro * world_size() + rank()) * kRowsPerRank, kRowsPerRank);
    auto backward = [&] { mg::div(loss_of(*ddp, part), kMicroBatches).backward(); };
    if (micro + 1 < kMicroBatches) {
      auto no_sync = ddp->no_sync();
      backward();
    } else {
      backward();  // outside no_sync: averages what the three backwards accumulated
    }
  }
  loss_of(*reference, batch).backward();
  CHECK(max_difference(gradients_of(ddp->module()), gradients_of(*reference)) < kTolerance);
  CHECK(same_on_every_rank(flat_state(ddp->module())));
}

namespace {

// Two heads over one trunk; `uses_second_head` says which heads a forward uses.
class TwoHeads : public mg::nn::Module {
 public:
  explicit TwoHeads(uint64_t seed) : Module("TwoHeads") {
    mg::Generator generator(seed);
    first = register_module("first", std::make_shared<mg::nn::Linear>(6, kClasses, true, &generator));
    second = register_module("second", std::make_shared<mg::nn::Linear>(6, kClasses, true, &generator));
    to(mg::DType::Float64);
  }
  Tensor forward(const Tensor& input) override {
    Tensor output = (*first)(input);
    return uses_second_head ? mg::add(output, (*second)(input)) : output;
  }

  std::shared_ptr<mg::nn::Linear> first;
  std::shared_ptr<mg::nn::Linear> second;
  bool uses_second_head = false;
};

}  // namespace

namespace {

// The MLP's first two layers under mg::checkpoint: their gradients come from the nested
// backward of the recomputation, the last layer's from the outer one.
class CheckpointedMlp : public mg::nn::Module {
 public:
  explicit CheckpointedMlp(uint64_t seed) : Module("CheckpointedMlp") {
    mg::Generator generator(seed);
    trunk = register_module("trunk", std::make_shared<mg::nn::Sequential>(
                                         std::make_shared<mg::nn::Linear>(6, 16, true, &generator),
                                         std::make_shared<mg::nn::ReLU>()));
    head = register_module("head", std::make_shared<mg::nn::Linear>(16, kClasses, true, &generator));
    to(mg::DType::Float64);
  }
  Tensor forward(const Tensor& input) override {
    return (*head)(mg::checkpoint([this](const Tensor& x) { return (*trunk)(x); }, input));
  }

  std::shared_ptr<mg::nn::Sequential> trunk;
  std::shared_ptr<mg::nn::Linear> head;
};

}  // namespace

TEST_CASE("DDP with mg::checkpoint: gradients of the recomputed layers are averaged too", "[ddp]") {
  auto model = std::make_shared<CheckpointedMlp>(100 + rank());
  auto ddp = wrap(model, {.first_bucket_bytes = 64, .bucket_bytes = 64});
  auto reference = std::make_shared<CheckpointedMlp>(1);
  reference->load_state_dict(model->state_dict());
  const Batch batch = draw_batch(kRowsPerRank * world_size(), 27, mlp_input);
  loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
  loss_of(*reference, batch).backward();
  CHECK(ddp->bucket_layout().size() == 3);  // head (24 + 384 bytes), 0.bias, 0.weight
  CHECK(max_difference(gradients_of(*model), gradients_of(*reference)) < kTolerance);
}

TEST_CASE("DDP: parameters no rank uses are an error on every rank, naming them", "[ddp]") {
  auto ddp = wrap(std::make_shared<TwoHeads>(7));
  const Batch batch = draw_batch(kRowsPerRank * world_size(), 24, mlp_input);
  CHECK_THROWS_WITH(loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward(),
                    Contains("received no gradient in this backward") && Contains("second.weight, second.bias"));
  // The group is still in step on every rank: the next collective pairs up.
  CHECK(same_on_every_rank(flat_state(ddp->module())));
}

TEST_CASE("DDP find_unused_parameters: a head only odd ranks use is averaged with zeros from the others",
          "[ddp]") {
  auto model = std::make_shared<TwoHeads>(7);
  model->uses_second_head = rank() % 2 == 1;
  auto ddp = wrap(model, {.find_unused_parameters = true});
  auto reference = std::make_shared<TwoHeads>(7);
  reference->load_state_dict(model->state_dict());
  const Batch batch = draw_batch(kRowsPerRank * world_size(), 25, mlp_input);
  loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
  // The reference: each rank's rows with that rank's heads, gradients accumulated, averaged.
  for (int r = 0; r < world_size(); ++r) {
    reference->uses_second_head = r % 2 == 1;
    loss_of(*reference, batch.rows(kRowsPerRank * r, kRowsPerRank)).backward();
  }
  for (const Tensor& parameter : reference->parameters()) parameter.grad().div_(world_size());
  CHECK(max_difference(gradients_of(*model), gradients_of(*reference)) < kTolerance);
}

TEST_CASE("DDP COMMUNICATION bytes: one staging copy of the state at construction, of the buffers per forward",
          "[ddp]") {
  auto model = resnet(100 + rank());
  std::vector<Tensor> state = model->parameters();
  const std::vector<Tensor> buffers = model->buffers();
  state.insert(state.end(), buffers.begin(), buffers.end());
  int64_t state_bytes = 0, buffer_bytes = 0;
  for (const Tensor& tensor : state) state_bytes += static_cast<int64_t>(tensor.nbytes());
  for (const Tensor& tensor : buffers) buffer_bytes += static_cast<int64_t>(tensor.nbytes());
  auto communication = [](bool peak) {
    const mg::memory::CategoryBytes bytes = mg::memory::snapshot().category(mg::MemoryCategory::Communication);
    return peak ? bytes.peak : bytes.current;
  };

  mg::memory::reset_peak_stats();
  auto ddp = wrap(model);
  CHECK(communication(true) == state_bytes);
  CHECK(communication(false) == 0);
  mg::memory::reset_peak_stats();
  const Batch batch = draw_batch(kRowsPerRank * world_size(), 26, image_input);
  loss_of(*ddp, batch.rows(kRowsPerRank * rank(), kRowsPerRank)).backward();
  CHECK(communication(true) == buffer_bytes);
  CHECK(communication(false) == 0);
}
