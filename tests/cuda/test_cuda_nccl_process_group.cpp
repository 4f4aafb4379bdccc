// tests/cuda/test_cuda_nccl_process_group.cpp — the NCCL backend on one GPU: a world of one
// (NCCL refuses two ranks on one GPU; several ranks need a machine with several GPUs).
//
// With one rank every collective's expected result is its input (a sum or average over one
// rank, a broadcast from itself, a gather of one chunk), checked value for value on every
// dtype NCCL carries, with each output inside a larger buffer whose tail must stay
// untouched (a count in bytes instead of elements would write past it). Beyond values: a
// collective waits on the device for the work enqueued before it on the caller's stream,
// wait() orders the caller's stream after the collective without blocking the host, the
// caching allocator does not hand out a tensor's memory while NCCL still uses it, CPU
// tensors are refused, and a collective that cannot complete ends with a timeout error
// (in a child process: the communicator is aborted).
#include <catch2/catch.hpp>

#if defined(MG_WITH_NCCL)

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cuda/kernel_checks.h"
#include "cuda/stream_hold.h"
#include "distributed/scoped_environment.h"
#include "memgrad/cuda/runtime.h"
#include "memgrad/distributed/init_process_group.h"
#include "memgrad/distributed/nccl_process_group.h"

namespace {

using Catch::Matchers::Contains;
using cuda_checks::check_equal;
using cuda_checks::random_values;
using cuda_checks::Values;
using mg::Device;
using mg::DType;
using mg::Tensor;
using mg::distributed::Backend;
using mg::distributed::ProcessGroup;
using mg::distributed::ReduceOp;
using mg_test::StreamHold;
using namespace std::chrono_literals;

constexpr DType kNcclTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                DType::Int64,   DType::Int32,   DType::UInt8};
constexpr double kSentinel = 77;

std::shared_ptr<ProcessGroup> nccl_group(std::chrono::milliseconds timeout = 60s) {
  return mg::distributed::init_process_group({.backend = Backend::Nccl, .timeout = timeout});
}

// A group whose communicator has run a collective of each kind the stream tests use.
// NOTE: the first launch of a kernel in a process loads its module (CUDA's lazy loading,
// the default), and loading waits for the device; a held stream then holds the host too.
// On the H200 a fresh communicator's first all_gather, and later the first mg::mul of the
// process, each returned only when the hold ran out. So the stream tests launch every
// kernel once before holding a stream: what they measure is memgrad's ordering.
std::shared_ptr<ProcessGroup> warmed_nccl_group() {
  const auto group = nccl_group();
  const Tensor input = mg::ones({16}, {.device = Device::cuda()});
  const Tensor output = mg::empty({16}, {.device = Device::cuda()});
  group->all_gather(output, input)->synchronize();
  group->barrier()->synchronize();
  return group;
}

// A tensor of `count` elements at the start of a buffer twice as long, whose second half
// holds kSentinel: the second half is what a collective must not touch.
struct Guarded {
  Tensor buffer;
  Tensor view;
};
Guarded guarded(int64_t count, DType dtype) {
  Tensor buffer = mg::full({2 * count}, kSentinel, {.dtype = dtype, .device = Device::cuda()});
  return {buffer, buffer.narrow(0, 0, count)};
}
void check_tail_untouched(const Guarded& guarded, const std::string& what) {
  const int64_t count = guarded.view.numel();
  check_equal(guarded.buffer.narrow(0, count, count).to(Device::cpu()),
              mg::full({count}, kSentinel, {.dtype = guarded.buffer.dtype()}), what + ": the tail");
}

}  // namespace

TEST_CASE("NCCL: a world of one on this GPU", "[cuda][nccl]") {
  const auto group = nccl_group();
  CHECK(group->rank() == 0);
  CHECK(group->size() == 1);
  CHECK(group->local_rank() == 0);
  CHECK(group->device() == Device::cuda(0));
  CHECK(std::string(group->backend_name()) == "nccl");
  CHECK(mg::distributed::nccl_version() >= 21000);  // ncclAvg and bfloat16 came with 2.10
}

TEST_CASE("NCCL: a world of one from torchrun-style variables", "[cuda][nccl]") {
  const mg_test::ScopedEnvironment launch({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"},
                                {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29533"}});
  const auto group = nccl_group();
  CHECK(group->rank() == 0);
  CHECK(group->size() == 1);
  CHECK(group->device() == Device::cuda(0));
}

TEST_CASE("NCCL: rank 1 of 2 without MASTER_ADDR and MASTER_PORT is told to set them", "[cuda][nccl]") {
  const mg_test::ScopedEnvironment launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  CHECK_THROWS_WITH(nccl_group(), Contains("rank 1 of 2 needs MASTER_ADDR and MASTER_PORT"));
}

TEST_CASE("NCCL: all_reduce, sum and average, on every dtype", "[cuda][nccl]") {
  const auto group = nccl_group();
  uint64_t seed = 1800;
  for (const DType dtype : kNcclTypes) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
      if (op == ReduceOp::Average && !mg::is_floating(dtype)) continue;
      const std::string what = mg::detail::str_cat("all_reduce (", reduce_op_name(op), ") ", dtype);
      const Tensor expected = random_values({1000}, dtype, ++seed, Values::Positive);
      const Guarded tensor = guarded(1000, dtype);
      tensor.view.copy_(expected.to(Device::cuda()));
      group->all_reduce(tensor.view, op)->wait();
      check_equal(tensor.view.to(Device::cpu()), expected, what);
      check_tail_untouched(tensor, what);
    }
  }
}

TEST_CASE("NCCL: broadcast from rank 0, on every dtype and bool", "[cuda][nccl]") {
  const auto group = nccl_group();
  uint64_t seed = 1810;
  for (const DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                            DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
    const std::string what = mg::detail::str_cat("broadcast ", dtype);
    const Tensor expected = random_values({333}, dtype, ++seed, Values::Positive);
    const Guarded tensor = guarded(333, dtype);
    tensor.view.copy_(expected.to(Device::cuda()));
    group->broadcast(tensor.view, 0)->wait();
    check_equal(tensor.view.to(Device::cpu()), expected, what);
    check_tail_untouched(tensor, what);
  }
  const Tensor tensor = mg::ones({4}, {.device = Device::cuda()});
  CHECK_THROWS_WITH(group->broadcast(tensor, 1), Contains("root rank 1 is not in this group of 1"));
}

TEST_CASE("NCCL: reduce_scatter and all_gather, on every dtype", "[cuda][nccl]") {
  const auto group = nccl_group();
  uint64_t seed = 1820;
  for (const DType dtype : kNcclTypes) {
    const Tensor expected = random_values({512}, dtype, ++seed, Values::Positive);
    const Tensor input = expected.to(Device::cuda());
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
      if (op == ReduceOp::Average && !mg::is_floating(dtype)) continue;
      const std::string what = mg::detail::str_cat("reduce_scatter (", reduce_op_name(op), ") ", dtype);
      const Guarded output = guarded(512, dtype);
      group->reduce_scatter(output.view, input, op)->wait();
      check_equal(output.view.to(Device::cpu()), expected, what);
      check_tail_untouched(output, what);
    }
    const std::string what = mg::detail::str_cat("all_gather ", dtype);
    const Guarded output = guarded(512, dtype);
    group->all_gather(output.view, input)->wait();
    check_equal(output.view.to(Device::cpu()), expected, what);
    check_tail_untouched(output, what);
  }
}

TEST_CASE("NCCL: barrier completes, and synchronize waits on the host", "[cuda][nccl]") {
  const auto group = nccl_group();
  const auto work = group->barrier();
  work->wait();
  work->synchronize();
  CHECK(work->is_completed());
}

TEST_CASE("NCCL: a collective waits for the caller's stream, and wait() orders it without "
          "blocking the host", "[cuda][nccl][host-sync]") {
  const auto group = warmed_nccl_group();
  mg::cuda::Stream stream(Device::cuda());
  const mg::cuda::StreamGuard current(stream);
  const Tensor output = mg::zeros({256}, {.device = Device::cuda()});
  std::shared_ptr<mg::distributed::Work> work;
  Tensor doubled = mg::mul(output, 2.0);  // its kernel loaded (see warmed_nccl_group)
  {
    StreamHold hold(stream);
    // Each phase's host time, so that a failure names the call that waited.
    std::string phases;
    auto clock = std::chrono::steady_clock::now();
    auto lap = [&](const char* phase) {
      const auto now = std::chrono::steady_clock::now();
      phases += std::string(phase) + " " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - clock).count()) + " ms; ";
      clock = now;
    };
    // Enqueued behind the hold: the collective must wait for it on the device.
    const Tensor input = mg::full({256}, 7.0, {.device = Device::cuda()});
    lap("full");
    work = group->all_gather(output, input);
    lap("all_gather");
    work->wait();  // returns while the stream is held: the host did not wait
    lap("wait");
    CHECK_FALSE(work->is_completed());
    lap("is_completed");
    doubled = mg::mul(output, 2.0);  // ordered after the collective by wait()
    lap("mul");
    INFO(phases);
    CHECK_FALSE(hold.timed_out());
  }  // the hold is released
  work->synchronize();
  CHECK(work->is_completed());
  check_equal(output.to(Device::cpu()), mg::full({256}, 7.0), "the gathered input");
  check_equal(doubled.to(Device::cpu()), mg::full({256}, 14.0), "read after wait()");
}

TEST_CASE("NCCL: a tensor's memory is not handed out again while NCCL still uses it",
          "[cuda][nccl][host-sync]") {
  const auto group = warmed_nccl_group();
  mg::cuda::Stream stream(Device::cuda());
  const mg::cuda::StreamGuard current(stream);
  std::vector<const void*> used_by_nccl;
  std::shared_ptr<mg::distributed::Work> work;
  {
    StreamHold hold(stream);
    {
      const Tensor input = mg::full({1 << 16}, 3.0, {.device = Device::cuda()});
      const Tensor output = mg::empty({1 << 16}, {.device = Device::cuda()});
      used_by_nccl = {input.raw_data(), output.raw_data()};
      work = group->all_gather(output, input);
    }  // both tensors die while the collective waits behind the hold
    for (int i = 0; i < 2; ++i) {  // as many blocks of that size as just died
      const Tensor next = mg::empty({1 << 16}, {.device = Device::cuda()});
      CHECK(next.raw_data() != used_by_nccl[0]);
      CHECK(next.raw_data() != used_by_nccl[1]);
    }
    CHECK_FALSE(hold.timed_out());
  }
  work->synchronize();
}

TEST_CASE("NCCL: CPU tensors, tensors of another GPU and bool sums are refused", "[cuda][nccl]") {
  const auto group = nccl_group();
  CHECK_THROWS_WITH(group->all_reduce(mg::ones({4})),
                    Contains("all_reduce: the NCCL backend carries CUDA tensors, got a float32 tensor "
                             "of shape [4] on cpu") && Contains("Backend::Mpi"));
  CHECK_THROWS_WITH(group->all_gather(mg::ones({4}), mg::ones({4})),
                    Contains("all_gather: the NCCL backend carries CUDA tensors"));
  CHECK_THROWS_WITH(group->all_gather(mg::ones({4}, {.device = Device::cuda()}), mg::ones({4})),
                    Contains("must have the same dtype and device"));
  CHECK_THROWS_WITH(group->all_reduce(mg::ones({4}, {.dtype = DType::Bool, .device = Device::cuda()})),
                    Contains("cannot reduce a bool tensor"));
  if (mg::cuda::device_count() > 1) {
    CHECK_THROWS_WITH(group->all_reduce(mg::ones({4}, {.device = Device::cuda(1)})),
                      Contains("is not on this rank's GPU, cuda:0"));
  }
  CHECK_THROWS_WITH(mg::distributed::init_process_group({.backend = Backend::Nccl, .device = Device::cpu()}),
                    Contains("the NCCL backend carries CUDA tensors, but the group's device is cpu"));
}

// The child of the next test: a collective held back past the timeout. Hidden ("[.]"):
// ctest does not run it on its own.
TEST_CASE("NCCL timeout child", "[.][nccl-timeout-child]") {
  const auto group = warmed_nccl_group();  // start-up and warm-up may take more than a second
  group->set_timeout(1s);
  mg::cuda::Stream stream(Device::cuda());
  const mg::cuda::StreamGuard current(stream);
  StreamHold hold(stream, 5s);
  const Tensor input = mg::ones({16}, {.device = Device::cuda()});
  const Tensor output = mg::empty({16}, {.device = Device::cuda()});
  const auto work = group->all_gather(output, input);
  std::this_thread::sleep_for(1500ms);
  try {
    (void)work->is_completed();
    std::printf("child: no error\n");
  } catch (const mg::Error& error) {
    std::printf("child saw: %s\n", error.what());
  }
  try {
    (void)group->barrier();
    std::printf("child: the group took another collective\n");
  } catch (const mg::Error& error) {
    std::printf("child saw again: %s\n", error.what());
  }
  std::fflush(stdout);
  hold.release();
  // NOTE: the process ends here without dropping the aborted communicator's last kernel
  // cleanly; the parent judges only the lines above.
  std::_Exit(0);
}

TEST_CASE("NCCL: a collective that cannot complete ends with a timeout error",
          "[cuda][nccl]") {
  std::array<char, 4096> path{};
  const ssize_t length = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  REQUIRE(length > 0);
  const std::string command = std::string(path.data(), length) + " \"[nccl-timeout-child]\" 2>&1";
  FILE* child = ::popen(command.c_str(), "r");
  REQUIRE(child != nullptr);
  std::string output;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), child) != nullptr) output += chunk.data();
  ::pclose(child);
  INFO(output);
  CHECK_THAT(output, Contains("child saw: all_gather of a float32 tensor of shape [16] on cuda:0") &&
                         Contains("did not complete within 1 s"));
  CHECK_THAT(output, Contains("child saw again:") && Contains("can no longer be used"));
  CHECK_THAT(output, Contains("the NCCL communicator was aborted"));
}

#endif  // MG_WITH_NCCL
