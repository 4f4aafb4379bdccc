// tests/distributed/test_single_process_group.cpp — the world of one in this process: every
// collective leaves its tensor as it is or copies input to output, completes at once, and
// still makes the shared checks (a wrong size is refused as on any backend).
#include <catch2/catch.hpp>

#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/distributed/single_process_group.h"

using mg::Tensor;
using mg::distributed::ReduceOp;
using Catch::Matchers::Contains;

TEST_CASE("SingleProcessGroup: collectives over one rank", "[distributed]") {
  mg::distributed::SingleProcessGroup group;
  CHECK(group.rank() == 0);
  CHECK(group.size() == 1);
  CHECK(group.local_rank() == 0);
  CHECK(group.device() == mg::Device::cpu());
  CHECK(std::string(group.backend_name()) == "single-process");

  const std::vector<double> values{1.5, -2.0, 3.25, 4.0};
  Tensor tensor = mg::from_vector(values, {2, 2});
  auto work = group.all_reduce(tensor, ReduceOp::Average);
  CHECK(work->is_completed());
  work->wait();
  CHECK(tensor.to_vector<double>() == values);
  group.broadcast(tensor, 0)->wait();
  CHECK(tensor.to_vector<double>() == values);

  Tensor output = mg::zeros({4}, {.dtype = mg::DType::Float64});
  group.all_gather(output, tensor)->wait();
  CHECK(output.to_vector<double>() == values);
  Tensor scattered = mg::zeros({2, 2}, {.dtype = mg::DType::Float64});
  group.reduce_scatter(scattered, output, ReduceOp::Sum)->wait();
  CHECK(scattered.to_vector<double>() == values);
  group.barrier()->wait();

  CHECK_THROWS_WITH(group.all_gather(mg::zeros({3}, {.dtype = mg::DType::Float64}), tensor),
                    Contains("must hold the input's 4 elements once per rank"));
  CHECK_THROWS_WITH(group.broadcast(tensor, 1), Contains("root rank 1 is not in this group of 1 ranks"));
}
