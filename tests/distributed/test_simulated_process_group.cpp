// tests/distributed/test_simulated_process_group.cpp — rank r of N alone in this process
// (distributed/simulated_process_group.h): on CPU tensors the collectives give what they
// would if every rank held the same data; as rank 0 of 1 it trains (DDP, ZeRO-1) to the
// same parameters and the same bytes per category as SingleProcessGroup; the memory it
// holds mirrors MPI (tensors until wait) or NCCL (nothing held, a one-float barrier);
// and the same steps on the simulated device predict the CPU run's peaks to the byte.
#include <catch2/catch.hpp>

#include <vector>

#include "distributed/prediction_test_support.h"
#include "memgrad/core/factory.h"
#include "memgrad/distributed/simulated_process_group.h"
#include "memgrad/distributed/single_process_group.h"

using mg::DType;
using mg::MemoryCategory;
using mg::Tensor;
using mg::distributed::Backend;
using mg::distributed::ReduceOp;
using mg::distributed::SimulatedProcessGroup;
using mg_test::prediction::Peaks;
using mg_test::prediction::Training;
using Catch::Matchers::Contains;

namespace {

std::vector<double> doubles(const Tensor& tensor) { return tensor.to_vector<double>(); }

int64_t temporary_bytes() {
  return mg::memory::snapshot(mg::Device::cpu()).category(MemoryCategory::Temporary).current;
}

}  // namespace

TEST_CASE("SimulatedProcessGroup: collectives as if every rank held this rank's data", "[distributed]") {
  SimulatedProcessGroup group(/*rank=*/1, /*size=*/4, mg::Device::cpu());
  CHECK(group.rank() == 1);
  CHECK(group.size() == 4);
  CHECK(group.device() == mg::Device::cpu());
  CHECK(group.mirrored() == Backend::Mpi);
  CHECK(std::string(group.backend_name()) == "simulated");

  const std::vector<double> values{1.5, -2.0, 3.25, 4.0};
  Tensor tensor = mg::from_vector(values, {2, 2});
  auto work = group.all_reduce(tensor, ReduceOp::Sum);
  CHECK(work->is_completed());
  work->wait();
  CHECK(doubles(tensor) == std::vector<double>{6.0, -8.0, 13.0, 16.0});
  group.all_reduce(tensor, ReduceOp::Average)->wait();
  CHECK(doubles(tensor) == std::vector<double>{6.0, -8.0, 13.0, 16.0});
  Tensor counts = mg::from_vector(std::vector<int64_t>{3, -1}, {2});
  group.all_reduce(counts, ReduceOp::Sum)->wait();
  CHECK(counts.to_vector<int64_t>() == std::vector<int64_t>{12, -4});
  group.broadcast(tensor, 3)->wait();
  CHECK(doubles(tensor) == std::vector<double>{6.0, -8.0, 13.0, 16.0});

  const Tensor small = mg::from_vector(std::vector<double>{1.0, 2.0}, {2});
  const Tensor gathered = mg::zeros({8}, {.dtype = DType::Float64});
  group.all_gather(gathered, small)->wait();
  CHECK(doubles(gathered) == std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2});

  const Tensor input = mg::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  const Tensor chunk = mg::zeros({2}, {.dtype = DType::Float64});
  group.reduce_scatter(chunk, input, ReduceOp::Average)->wait();
  CHECK(doubles(chunk) == std::vector<double>{2, 3});  // rank 1's chunk
  group.reduce_scatter(chunk, input, ReduceOp::Sum)->wait();
  CHECK(doubles(chunk) == std::vector<double>{8, 12});
  // A non-zero storage offset: the chunks are read from the tensor's first element.
  const Tensor offset_input = input.narrow(0, 4, 4);
  const Tensor half = mg::zeros({1}, {.dtype = DType::Float64});
  group.reduce_scatter(half, offset_input, ReduceOp::Average)->wait();
  CHECK(doubles(half) == std::vector<double>{5});
  group.barrier()->wait();
}

TEST_CASE("SimulatedProcessGroup: the shared checks and the mirrored backend's refusals", "[distributed]") {
  CHECK_THROWS_WITH(SimulatedProcessGroup(4, 4, mg::Device::cpu()), Contains("rank 4 of 4 ranks does not exist"));
  CHECK_THROWS_WITH(SimulatedProcessGroup(0, 0, mg::Device::cpu()), Contains("rank 0 of 0 ranks does not exist"));
  SimulatedProcessGroup mpi(0, 2, mg::Device::cpu());
  const Tensor tensor = mg::zeros({4}, {.dtype = DType::Float64});
  CHECK_THROWS_WITH(mpi.all_gather(mg::zeros({6}, {.dtype = DType::Float64}), tensor),
                    Contains("must hold the input's 4 elements once per rank: 8 elements for 2 ranks"));
  CHECK_THROWS_WITH(mpi.all_gather(tensor.narrow(0, 0, 2), tensor.narrow(0, 1, 1)), Contains("share bytes"));
  CHECK_THROWS_WITH(mpi.all_reduce(mg::zeros({2}, {.dtype = DType::BFloat16})),
                    Contains("the mpi backend this simulated group stands in for cannot reduce a bfloat16"));
  CHECK_THROWS_WITH(mpi.all_reduce(mg::zeros({2}, {.dtype = DType::Bool})), Contains("cannot reduce a bool"));
  SimulatedProcessGroup nccl(0, 2, mg::Device::cpu(), Backend::Nccl);
  nccl.all_reduce(mg::zeros({2}, {.dtype = DType::BFloat16}))->wait();  // NCCL adds bfloat16
  CHECK_THROWS_WITH(nccl.all_reduce(mg::zeros({2}, {.dtype = DType::Bool})), Contains("nccl backend"));
  SimulatedProcessGroup on_simulated(0, 2, mg::Device::simulated(6), Backend::Nccl);
  CHECK_THROWS_WITH(on_simulated.broadcast(tensor),
                    Contains("carries tensors on simulated:6, got a float64 tensor of shape [4] on cpu"));
}

TEST_CASE("SimulatedProcessGroup: MPI's memory holds a collective's tensors until wait, NCCL's none",
          "[distributed]") {
  const int64_t before = temporary_bytes();
  mg::memory::reset_peak_stats(mg::Device::cpu());
  SECTION("MPI: a tensor dropped before wait stays allocated until then") {
    SimulatedProcessGroup group(0, 2, mg::Device::cpu(), Backend::Mpi);
    const Tensor output = mg::zeros({8}, {.dtype = DType::Float64, .category = MemoryCategory::Parameter});
    std::shared_ptr<mg::distributed::Work> work;
    {
      const Tensor sent = mg::zeros({4}, {.dtype = DType::Float64});  // TEMPORARY, as ZeRO's copy
      work = group.all_gather(output, sent);
    }
    CHECK(temporary_bytes() - before == 32);
    work->wait();
    CHECK(temporary_bytes() == before);
    group.barrier()->wait();  // MPI's barrier allocates nothing
    CHECK(mg::memory::snapshot(mg::Device::cpu()).category(MemoryCategory::Temporary).peak - before == 32);
  }
  SECTION("NCCL: nothing held; the barrier's one float comes and goes") {
    SimulatedProcessGroup group(0, 2, mg::Device::cpu(), Backend::Nccl);
    const Tensor output = mg::zeros({8}, {.dtype = DType::Float64, .category = MemoryCategory::Parameter});
    std::shared_ptr<mg::distributed::Work> work;
    {
      const Tensor sent = mg::zeros({4}, {.dtype = DType::Float64});
      work = group.all_gather(output, sent);
    }
    CHECK(temporary_bytes() == before);
    mg::memory::reset_peak_stats(mg::Device::cpu());
    group.barrier()->wait();
    CHECK(temporary_bytes() == before);
    CHECK(mg::memory::snapshot(mg::Device::cpu()).category(MemoryCategory::Temporary).peak - before == 4);
  }
}

TEST_CASE("SimulatedProcessGroup as rank 0 of 1 trains as SingleProcessGroup: same parameters, same bytes",
          "[distributed]") {
  const Training training = GENERATE(Training::Ddp, Training::Zero, Training::DdpAndZero);
  INFO(mg_test::prediction::training_name(training));
  const auto batch = mg_test::ddp::draw_batch(8, 5, mg_test::ddp::image_input);
  auto single_model = mg_test::ddp::cnn(1);
  const Peaks single = mg_test::prediction::training_peaks(
      single_model, std::make_shared<mg::distributed::SingleProcessGroup>(), training, batch);
  auto simulated_model = mg_test::ddp::cnn(1);
  const Peaks simulated = mg_test::prediction::training_peaks(
      simulated_model, std::make_shared<SimulatedProcessGroup>(0, 1, mg::Device::cpu()), training, batch);
  INFO("single process: " << describe(single) << "\nsimulated: " << describe(simulated));
  CHECK(simulated == single);
  CHECK(mg_test::ddp::flat_state(*simulated_model) == mg_test::ddp::flat_state(*single_model));
}

TEST_CASE("Per-rank memory of DDP and ZeRO-1 predicted on the simulated device: the CPU run's bytes exactly",
          "[distributed][simulated]") {
  const Training training = GENERATE(Training::Ddp, Training::Zero, Training::DdpAndZero);
  const int world_size = GENERATE(1, 2, 4);
  const int rank = world_size - 1;
  INFO(mg_test::prediction::training_name(training) << ", rank " << rank << " of " << world_size);
  const auto batch = mg_test::ddp::draw_batch(8, 5, mg_test::ddp::image_input);
  const Peaks measured = mg_test::prediction::training_peaks(
      mg_test::ddp::cnn(1), std::make_shared<SimulatedProcessGroup>(rank, world_size, mg::Device::cpu()), training,
      batch);
  const Peaks predicted = mg_test::prediction::predicted_peaks(mg_test::ddp::cnn, training, batch, rank, world_size);
  INFO("measured on the CPU: " << describe(measured) << "\npredicted: " << describe(predicted));
  CHECK(predicted == measured);
  CHECK(measured.category(MemoryCategory::OptimizerState) > 0);
}
