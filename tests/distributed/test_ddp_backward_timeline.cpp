// tests/distributed/test_ddp_backward_timeline.cpp — DistributedDataParallel's host
// timeline of a synchronising backward (BackwardTimeline), in one process: one launch per
// bucket, in order, every bucket but the last issued while backward still had gradients to
// compute, and only synchronising backwards recorded.
#include <catch2/catch.hpp>

#include <memory>

#include "distributed/ddp_test_support.h"
#include "memgrad/distributed/distributed_data_parallel.h"
#include "memgrad/distributed/single_process_group.h"

using mg::distributed::BackwardTimeline;
using mg::distributed::DistributedDataParallel;
using mg::distributed::SingleProcessGroup;
using namespace mg_test::ddp;

TEST_CASE("DDP backward timeline: each bucket launched in order, all but the last before backward's last gradient",
          "[distributed][ddp]") {
  // One bucket per Linear (test_ddp_single_process.cpp's caps): the last bucket holds the
  // first layer, whose gradients backward computes last.
  auto ddp = std::make_shared<DistributedDataParallel>(mlp(1), std::make_shared<SingleProcessGroup>(),
                                                       mg::distributed::DistributedDataParallelOptions{
                                                           .first_bucket_bytes = 400, .bucket_bytes = 1000});
  REQUIRE(ddp->bucket_layout().size() == 3);
  CHECK(ddp->last_backward_timeline().bucket_launch_ms.empty());  // no backward yet

  const Batch batch = draw_batch(8, 2, mlp_input);
  loss_of(*ddp, batch).backward();
  const BackwardTimeline timeline = ddp->last_backward_timeline();
  REQUIRE(timeline.bucket_launch_ms.size() == 3);
  CHECK(timeline.bucket_launch_ms.front() >= 0);
  for (size_t bucket = 1; bucket < 3; ++bucket) {
    CHECK(timeline.bucket_launch_ms[bucket] >= timeline.bucket_launch_ms[bucket - 1]);
  }
  CHECK(timeline.bucket_launch_ms[0] < timeline.last_gradient_ms);
  CHECK(timeline.bucket_launch_ms[1] < timeline.last_gradient_ms);
  CHECK(timeline.bucket_launch_ms[2] >= timeline.last_gradient_ms);  // launched by the last gradient
  CHECK(timeline.bucket_launch_ms[2] <= timeline.backward_end_ms);
  CHECK(timeline.backward_end_ms <= timeline.reduced_ms);

  SECTION("a backward under no_sync leaves the synchronising one's timeline") {
    {
      auto guard = ddp->no_sync();
      loss_of(*ddp, batch).backward();
    }
    CHECK(ddp->last_backward_timeline().bucket_launch_ms == timeline.bucket_launch_ms);
    CHECK(ddp->last_backward_timeline().reduced_ms == timeline.reduced_ms);
  }
}
