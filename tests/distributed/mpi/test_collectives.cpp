// tests/distributed/mpi/test_collectives.cpp — the MPI process group across 2 and 4
// processes (mpirun, see tests/CMakeLists.txt): every collective's result against the
// values computed locally from what each rank is known to send, in every dtype the
// backend carries; work handles that overlap and complete in any order; and the errors
// for what the backend cannot carry (CUDA tensors first), raised before anything is sent.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "memgrad/core/allocator/caching_allocator.h"
#include "memgrad/core/allocator/simulated_backend.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/storage.h"
#include "memgrad/core/tensor.h"
#include "memgrad/distributed/init_process_group.h"
#include "distributed/mpi/world.h"

using mg::DType;
using mg::Tensor;
using mg::distributed::ReduceOp;
using mg::distributed::Work;
using mg_test::world;

namespace {

// What rank `rank` holds at element i: distinct per rank and element, small integers so
// that sums are exact in every dtype.
int64_t value_of(int rank, int64_t i) { return 10 * rank + i + 1; }

Tensor rank_values(int rank, int64_t count, DType dtype) {
  std::vector<double> values;
  for (int64_t i = 0; i < count; ++i) values.push_back(static_cast<double>(value_of(rank, i)));
  return mg::from_vector(values, {count}).to(dtype);
}

// Element i summed over every rank.
std::vector<double> sum_over_ranks(int64_t count, int64_t offset = 0) {
  std::vector<double> sums(count, 0.0);
  for (int rank = 0; rank < world().size(); ++rank) {
    for (int64_t i = 0; i < count; ++i) sums[i] += static_cast<double>(value_of(rank, offset + i));
  }
  return sums;
}

std::vector<double> as_doubles(const Tensor& tensor) {
  return tensor.to(DType::Float64).to_vector<double>();
}

// A tensor whose storage claims to live on `device` (addresses without memory): what the
// backend must refuse before touching a byte.
Tensor tensor_on(mg::Device device, std::unique_ptr<mg::CachingAllocator>& keep_allocator) {
  keep_allocator = std::make_unique<mg::CachingAllocator>(
      device, std::make_unique<mg::SimulatedBackend>(size_t{64} << 20));
  auto storage = std::make_shared<mg::Storage>(4 * sizeof(float), *keep_allocator,
                                               mg::MemoryCategory::Gradient);
  return Tensor(std::make_shared<mg::TensorImpl>(storage, mg::Shape{4}, mg::Shape{1}, 0,
                                                 DType::Float32));
}

}  // namespace

TEST_CASE("Ranks come from mpirun: rank, size and local rank", "[mpi]") {
  auto& group = world();
  REQUIRE(std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr);
  CHECK(group.size() == std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
  CHECK(group.rank() == std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  CHECK(group.local_rank() == std::atoi(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")));
  CHECK(std::string(group.backend_name()) == "mpi");
  CHECK(group.timeout() == mg::distributed::kDefaultCollectiveTimeout);

  // Every rank is a different process: gathered, the ranks are 0 .. size - 1.
  Tensor gathered = mg::zeros({group.size()}, {.dtype = DType::Int64});
  group.all_gather(gathered, mg::full({1}, group.rank(), {.dtype = DType::Int64}))->wait();
  for (int rank = 0; rank < group.size(); ++rank) CHECK(gathered.to_vector<int64_t>()[rank] == rank);
}

TEST_CASE("all_reduce sums (or averages) in place, in every summable dtype", "[mpi]") {
  auto& group = world();
  const int64_t count = 1000;  // more than one eager message's worth for float64
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::UInt8}) {
    INFO("dtype " << dtype);
    const int64_t elements = dtype == DType::UInt8 ? 5 : count;  // sums below 256
    Tensor tensor = rank_values(group.rank(), elements, dtype);
    group.all_reduce(tensor, ReduceOp::Sum)->wait();
    CHECK(tensor.dtype() == dtype);
    CHECK(as_doubles(tensor) == sum_over_ranks(elements));
  }
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO("dtype " << dtype);
    Tensor tensor = rank_values(group.rank(), count, dtype);
    group.all_reduce(tensor, ReduceOp::Average)->wait();
    const std::vector<double> sums = sum_over_ranks(count);
    const std::vector<double> averages = as_doubles(tensor);
    for (int64_t i = 0; i < count; ++i) {
      CHECK(averages[i] == Approx(sums[i] / group.size()).epsilon(dtype == DType::Float32 ? 1e-6 : 1e-15));
    }
  }
}

TEST_CASE("broadcast copies the root's tensor to every rank, any dtype bit for bit", "[mpi]") {
  auto& group = world();
  for (int root : {0, group.size() - 1}) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Float16, DType::BFloat16}) {
      INFO("root " << root << ", dtype " << dtype);
      Tensor tensor = rank_values(group.rank(), 37, dtype).view({37, 1});
      group.broadcast(tensor, root)->wait();
      CHECK(as_doubles(tensor) == as_doubles(rank_values(root, 37, dtype)));
    }
  }
  Tensor flags = mg::full({3}, group.rank() == 0 ? 1.0 : 0.0, {.dtype = DType::Bool});
  group.broadcast(flags, 0)->wait();
  CHECK(flags.to_vector<bool>() == std::vector<bool>{true, true, true});
}

TEST_CASE("reduce_scatter gives rank r the sum (or average) of every rank's chunk r", "[mpi]") {
  auto& group = world();
  const int64_t chunk = 6;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
    INFO("op " << mg::distributed::reduce_op_name(op));
    Tensor input = rank_values(group.rank(), chunk * group.size(), DType::Float64)
                       .view({group.size(), chunk});
    Tensor output = mg::zeros({chunk}, {.dtype = DType::Float64});
    group.reduce_scatter(output, input, op)->wait();
    std::vector<double> expected = sum_over_ranks(chunk, chunk * group.rank());
    if (op == ReduceOp::Average) {
      for (double& value : expected) value /= group.size();
    }
    CHECK(output.to_vector<double>() == expected);
    // The input is read, not written.
    CHECK(as_doubles(input) == as_doubles(rank_values(group.rank(), chunk * group.size(), DType::Float64)));
  }
}

TEST_CASE("all_gather concatenates every rank's tensor in rank order", "[mpi]") {
  auto& group = world();
  for (DType dtype : {DType::Float32, DType::Int64, DType::Float16}) {
    INFO("dtype " << dtype);
    const int64_t count = 5;
    Tensor output = mg::zeros({group.size(), count}, {.dtype = dtype});
    group.all_gather(output, rank_values(group.rank(), count, dtype))->wait();
    std::vector<double> expected;
    for (int rank = 0; rank < group.size(); ++rank) {
      for (double value : as_doubles(rank_values(rank, count, dtype))) expected.push_back(value);
    }
    CHECK(as_doubles(output) == expected);
  }
}

TEST_CASE("Collectives run asynchronously: several in flight, waited for in any order", "[mpi]") {
  auto& group = world();
  Tensor summed = rank_values(group.rank(), 4096, DType::Float32);
  Tensor broadcast = rank_values(group.rank(), 4096, DType::Float64);
  Tensor gathered = mg::zeros({group.size() * 3}, {.dtype = DType::Int64});
  Tensor gathered_input = rank_values(group.rank(), 3, DType::Int64);

  const std::shared_ptr<Work> sum_work = group.all_reduce(summed);
  const std::shared_ptr<Work> broadcast_work = group.broadcast(broadcast, 0);
  const std::shared_ptr<Work> gather_work = group.all_gather(gathered, gathered_input);
  const std::shared_ptr<Work> barrier_work = group.barrier();
  // Waited for in the reverse order of their start.
  barrier_work->wait();
  gather_work->wait();
  broadcast_work->wait();
  while (!sum_work->is_completed()) {
  }
  sum_work->wait();  // already done: returns at once
  for (const auto& work : {sum_work, broadcast_work, gather_work, barrier_work}) {
    CHECK(work->is_completed());
  }
  CHECK(as_doubles(summed) == sum_over_ranks(4096));
  CHECK(as_doubles(broadcast) == as_doubles(rank_values(0, 4096, DType::Float64)));
  CHECK(as_doubles(gathered)[3 * group.size() - 1] == value_of(group.size() - 1, 2));
}

TEST_CASE("A collective whose Work is dropped still completes, by the group's end at the latest",
          "[mpi]") {
  Tensor tensor = rank_values(world().rank(), 100, DType::Float64);
  {
    // A group of its own (its collectives never mix with world()'s), ended with the scope.
    auto group = mg::distributed::init_process_group();
    group->all_reduce(tensor, ReduceOp::Sum);  // no wait
  }
  CHECK(tensor.to_vector<double>() == sum_over_ranks(100));
}

TEST_CASE("The MPI backend refuses what it cannot carry, on the calling rank, before sending",
          "[mpi]") {
  using Catch::Matchers::Contains;
  auto& group = world();
  std::unique_ptr<mg::CachingAllocator> cuda_allocator;
  const Tensor on_cuda = tensor_on(mg::Device::cuda(), cuda_allocator);
  CHECK_THROWS_WITH(group.all_reduce(on_cuda),
                    Contains("the MPI backend carries CPU tensors; use the NCCL backend for CUDA "
                             "tensors (got a float32 tensor of shape [4] on cuda:0)"));
  CHECK_THROWS_WITH(group.broadcast(on_cuda, 0), Contains("use the NCCL backend for CUDA tensors"));
  std::unique_ptr<mg::CachingAllocator> simulated_allocator;
  CHECK_THROWS_WITH(group.all_reduce(tensor_on(mg::Device::simulated(3), simulated_allocator)),
                    Contains("carries CPU tensors, got a float32 tensor of shape [4] on simulated:3"));

  CHECK_THROWS_WITH(group.all_reduce(mg::ones({2}, {.dtype = DType::Float16})),
                    Contains("cannot reduce a float16 tensor of shape [2] on cpu"));
  CHECK_THROWS_WITH(group.all_reduce(mg::ones({2}, {.dtype = DType::Int64}), ReduceOp::Average),
                    Contains("ReduceOp::Average needs a floating-point tensor, got an int64"));
  CHECK_THROWS_WITH(group.all_reduce(mg::ones({2, 3}).t()),
                    Contains("all_reduce: the tensor (a float32 tensor of shape [3, 2] on cpu, "
                             "strides [1, 3]) is not contiguous"));
  CHECK_THROWS_WITH(group.broadcast(mg::ones({2}), group.size()),
                    Contains("root rank " + std::to_string(group.size()) + " is not in this group"));
  CHECK_THROWS_WITH(group.reduce_scatter(mg::zeros({3}), mg::ones({3 * group.size() + 1})),
                    Contains("must hold one chunk of the output's 3 elements per rank"));
  CHECK_THROWS_WITH(group.all_gather(mg::zeros({2 * group.size()}, {.dtype = DType::Float64}),
                                     mg::ones({2})),
                    Contains("must have the same dtype and device"));
  Tensor shared = mg::zeros({2 * group.size()});
  CHECK_THROWS_WITH(group.all_gather(shared, shared.narrow(0, 0, 2)), Contains("share bytes"));
  CHECK_THROWS_WITH(group.set_timeout(std::chrono::milliseconds(0)),
                    Contains("the collective timeout must be positive"));

  // Nothing was started: the group still works.
  Tensor tensor = rank_values(group.rank(), 8, DType::Float32);
  group.all_reduce(tensor)->wait();
  CHECK(as_doubles(tensor) == sum_over_ranks(8));
}
