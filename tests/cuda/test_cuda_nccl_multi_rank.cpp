// tests/cuda/test_cuda_nccl_multi_rank.cpp — the NCCL backend across ranks, one GPU each:
// hidden test cases ("[.]": ctest does not run them) for a machine with two GPUs or more,
// started by a launcher, every rank running the same cases in the same order:
//
//   mpirun -np 2 build/tests/test_cuda "[nccl-multi-rank]"          # the id over MPI
//   for rank in 0 1; do RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 \
//     MASTER_PORT=29511 build/tests/test_cuda "[nccl-multi-rank]" & done; wait   # over TCP
//   mpirun -np 2 build/tests/test_cuda "[nccl-multi-rank-timeout]"  # rank 0 prints a verdict
//
// Every value is a small integer, so sums and averages are exact in every dtype (bfloat16
// holds integers up to 256 exactly): rank r holds base + r, base drawn from one seed on
// every rank.
#include <catch2/catch.hpp>

#if defined(MG_WITH_NCCL)

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cuda/kernel_checks.h"
#include "memgrad/distributed/init_process_group.h"

namespace {

using Catch::Matchers::Contains;
using cuda_checks::check_equal;
using mg::Device;
using mg::DType;
using mg::Tensor;
using mg::distributed::Backend;
using mg::distributed::ProcessGroup;
using mg::distributed::ReduceOp;
using namespace std::chrono_literals;

constexpr DType kNcclTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8};

std::shared_ptr<ProcessGroup> world(std::chrono::milliseconds timeout = 120s) {
  auto group = mg::distributed::init_process_group({.backend = Backend::Nccl, .timeout = timeout});
  REQUIRE(group->size() >= 2);
  return group;
}

// Integers 1 .. 16 drawn from `seed` (the same on every rank).
std::vector<double> base_values(int64_t count, uint64_t seed) {
  mg::Generator generator(seed);
  std::vector<double> values =
      mg::rand({count}, {.dtype = DType::Float64}, &generator).to_vector<double>();
  for (double& value : values) value = 1 + static_cast<int>(value * 16);
  return values;
}

// `values` + `offset`, as a CPU tensor of `dtype`.
Tensor host_tensor(std::vector<double> values, double offset, DType dtype) {
  for (double& value : values) value += offset;
  const int64_t count = static_cast<int64_t>(values.size());
  return mg::converted_copy(mg::from_vector(values, {count}), dtype, Device::cpu());
}

}  // namespace

TEST_CASE("NCCL ranks: all_reduce sums and averages over ranks", "[.][nccl-multi-rank]") {
  const auto group = world();
  const int size = group->size();
  const double rank_sum = size * (size - 1) / 2.0;
  uint64_t seed = 1900;
  for (const DType dtype : kNcclTypes) {
    const std::vector<double> base = base_values(1000, ++seed);
    std::vector<double> sum = base;
    for (double& value : sum) value *= size;
    const Tensor tensor = host_tensor(base, group->rank(), dtype).to(group->device());
    group->all_reduce(tensor, ReduceOp::Sum)->wait();
    check_equal(tensor.to(Device::cpu()), host_tensor(sum, rank_sum, dtype),
                mg::detail::str_cat("all_reduce (sum) ", dtype));
    if (!mg::is_floating(dtype)) continue;
    // With 2 ranks the average is base + 0.5, exact in every floating dtype.
    const Tensor averaged = host_tensor(base, group->rank(), dtype).to(group->device());
    group->all_reduce(averaged, ReduceOp::Average)->wait();
    check_equal(averaged.to(Device::cpu()), host_tensor(base, rank_sum / size, dtype),
                mg::detail::str_cat("all_reduce (average) ", dtype));
  }
}

TEST_CASE("NCCL ranks: broadcast from the last rank", "[.][nccl-multi-rank]") {
  const auto group = world();
  const int root = group->size() - 1;
  uint64_t seed = 1910;
  for (const DType dtype : kNcclTypes) {
    const std::vector<double> base = base_values(333, ++seed);
    const Tensor tensor = host_tensor(base, group->rank(), dtype).to(group->device());
    group->broadcast(tensor, root)->wait();
    check_equal(tensor.to(Device::cpu()), host_tensor(base, root, dtype),
                mg::detail::str_cat("broadcast ", dtype));
  }
}

TEST_CASE("NCCL ranks: reduce_scatter and all_gather keep rank order", "[.][nccl-multi-rank]") {
  const auto group = world();
  const int size = group->size();
  const int rank = group->rank();
  const int64_t chunk = 256;
  uint64_t seed = 1920;
  for (const DType dtype : kNcclTypes) {
    const std::vector<double> base = base_values(chunk * size, ++seed);
    // reduce_scatter: rank r's output is the sum over ranks of chunk r.
    const Tensor input = host_tensor(base, rank, dtype).to(group->device());
    const Tensor output = mg::empty({chunk}, {.dtype = dtype, .device = group->device()});
    group->reduce_scatter(output, input, ReduceOp::Sum)->wait();
    std::vector<double> expected(base.begin() + rank * chunk, base.begin() + (rank + 1) * chunk);
    for (double& value : expected) value *= size;
    check_equal(output.to(Device::cpu()), host_tensor(expected, size * (size - 1) / 2.0, dtype),
                mg::detail::str_cat("reduce_scatter ", dtype));
    // all_gather: chunk c of the output is rank c's input.
    const std::vector<double> mine(base.begin(), base.begin() + chunk);
    const Tensor gathered = mg::empty({chunk * size}, {.dtype = dtype, .device = group->device()});
    group->all_gather(gathered, host_tensor(mine, rank, dtype).to(group->device()))->wait();
    for (int c = 0; c < size; ++c) {
      check_equal(gathered.narrow(0, c * chunk, chunk).to(Device::cpu()), host_tensor(mine, c, dtype),
                  mg::detail::str_cat("all_gather ", dtype, ", chunk ", c));
    }
  }
}

TEST_CASE("NCCL ranks: barrier", "[.][nccl-multi-rank]") {
  const auto group = world();
  for (int i = 0; i < 3; ++i) group->barrier()->synchronize();
}

// Rank 1 never joins rank 0's all_reduce: rank 0 gets the timeout error, and says so.
TEST_CASE("NCCL ranks: a collective that rank 1 skips ends on rank 0 with a timeout error",
          "[.][nccl-multi-rank-timeout]") {
  const auto group = world(3s);
  group->barrier()->synchronize();  // both ranks are up
  if (group->rank() != 0) {
    // Stays in the job (its communicator alive) until rank 0 has timed out, so that rank 0
    // sees a collective nobody joins, not a peer that went away.
    std::this_thread::sleep_for(10s);
    return;
  }
  const Tensor tensor = mg::ones({4}, {.device = group->device()});
  const auto work = group->all_reduce(tensor);
  const auto start = std::chrono::steady_clock::now();
  // synchronize() polls: the watchdog's abort ends the wait.
  REQUIRE_THROWS_WITH(work->synchronize(), Contains("did not complete within 3 s"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(seconds < 30);
  REQUIRE_THROWS_WITH(group->barrier(), Contains("can no longer be used"));
  std::printf("rank 0: the all_reduce rank 1 skipped ended with a timeout error after %.1f s\n", seconds);
  std::fflush(stdout);
}

#endif  // MG_WITH_NCCL
