// tests/distributed/mpi/test_memory_prediction.cpp — per-rank memory prediction checked
// against real ranks: each rank trains a few DDP, ZeRO-1, and DDP + ZeRO-1 steps over MPI
// on the CPU, measures its own peaks per category (the CPU allocator's statistics), and
// compares them with its own prediction, the same steps run on the simulated device
// standing in for the CPU with a SimulatedProcessGroup as this rank of N. The CPU and the
// simulated device share the caching allocator's rounding, so the bytes must be equal,
// allocated and per category; ZeRO-1's OPTIMIZER_STATE is this rank's 1/N of AdamW's.
#include <catch2/catch.hpp>

#include <memory>

#include "distributed/prediction_test_support.h"
#include "memgrad/distributed/init_process_group.h"

using mg::MemoryCategory;
using mg_test::prediction::Peaks;
using mg_test::prediction::Training;

namespace {

// A group of its own for these tests (every rank runs them in the same order).
std::shared_ptr<mg::distributed::ProcessGroup> prediction_group() {
  static const std::shared_ptr<mg::distributed::ProcessGroup> group = mg::distributed::init_process_group();
  return group;
}

// The float64 bytes of AdamW's two moments for `elements` parameters, plus one 4-byte
// step counter per parameter tensor (plain AdamW) or per group (ZeRO's shard optimizer).
int64_t adam_state_bytes(int64_t elements, int64_t counters) { return 2 * elements * 8 + 4 * counters; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("Per-rank memory predicted on the simulated device equals each MPI rank's measured bytes",
          "[mpi][prediction]") {
  const Training training = GENERATE(Training::Ddp, Training::Zero, Training::DdpAndZero);
  const auto& group = prediction_group();
  INFO(mg_test::prediction::training_name(training) << ", rank " << group->rank() << " of " << group->size());
  // Each rank its own batch, in tensors of its own (a view of a larger batch would move
  // the larger storage's bytes into ACTIVATION when the first layer saves it).
  const auto batch = mg_test::ddp::draw_batch(8, 5 + group->rank(), mg_test::ddp::image_input);
  const Peaks measured = mg_test::prediction::training_peaks(mg_test::ddp::cnn(1), group, training, batch);
  const Peaks predicted =
      mg_test::prediction::predicted_peaks(mg_test::ddp::cnn, training, batch, group->rank(), group->size());
  INFO("measured over MPI: " << describe(measured) << "\npredicted: " << describe(predicted));
  CHECK(predicted == measured);

  // The CNN's AdamW groups: 576 weight elements (decayed, 3 tensors), 13 bias elements
  // (not decayed, 3 tensors).
  const int64_t n = group->size();
  const int64_t plain_state = adam_state_bytes(576 + 13, /*counters=*/6);
  const int64_t zero_state = adam_state_bytes(ceil_div(576, n) + ceil_div(13, n), /*counters=*/2);
  CHECK(measured.category(MemoryCategory::OptimizerState) == (training == Training::Ddp ? plain_state : zero_state));
}
