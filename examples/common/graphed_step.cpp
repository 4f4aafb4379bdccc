// examples/common/graphed_step.cpp — capture once, then copy each batch in and replay.
#include "examples/common/graphed_step.h"

#include <memgrad/core/memory_category.h>
#include "examples/common/cli.h"

namespace examples {

std::string cuda_graph_usage() {
  return R"(  --cuda-graph             capture the training step once as a CUDA graph and replay it
                           for every later batch (mg::cuda::CapturedStep: one launch per
                           step instead of one per kernel); cuda only, --accum 1;
                           dropout draws new masks at every replay, as eager steps do
)";
}

void check_cuda_graph(bool cuda_graph, mg::Device device, int64_t accum, bool with_host_work) {
  if (!cuda_graph) return;
  if (!device.is_cuda()) throw UsageError("--cuda-graph captures CUDA work: it needs --device cuda");
  if (accum != 1) throw UsageError("--cuda-graph captures a step of one batch: it does not go with --accum");
  if (with_host_work) {
    throw UsageError("--cuda-graph replays the step without the host: it goes with none of --memory-timeline, "
                     "--predict-memory, --fit-batch and --detect-anomaly");
  }
}

mg::Tensor GraphedStep::run(const mg::data::Batch& batch, const Step& step) {
  if (!captured_) {
    static_batch_ = {batch.inputs.clone(), batch.targets.clone()};
    static_batch_.inputs.set_memory_category(mg::MemoryCategory::Input);
    static_batch_.targets.set_memory_category(mg::MemoryCategory::Input);
    // The warm-up is this batch's own step; the capture records the next call without running it.
    captured_.emplace([&] { loss_ = step(static_batch_); }, mg::cuda::CaptureOptions{.device = device_, .warmup_steps = 1});
    return loss_;
  }
  if (batch.inputs.sizes() != static_batch_.inputs.sizes()) return step(batch);
  static_batch_.inputs.copy_(batch.inputs);
  static_batch_.targets.copy_(batch.targets);
  captured_->replay();
  return loss_;
}

}  // namespace examples
