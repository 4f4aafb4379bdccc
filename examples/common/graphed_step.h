// examples/common/graphed_step.h — the examples' --cuda-graph for training: the first step
// runs eagerly on its batch and is captured as a CUDA graph (mg::cuda::CapturedStep, with
// that step as its one warm-up), and every later batch of the same size is copied into the
// step's static inputs and replayed; a batch of another size (an epoch's last) runs
// eagerly, so no sample is dropped. Kept across epochs: one capture per run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <memgrad/cuda/captured_step.h>
#include <memgrad/data/batch.h>

namespace examples {

// The flag's lines for a usage text.
std::string cuda_graph_usage();

// Throws UsageError where --cuda-graph cannot do its work: off a CUDA device, with
// gradient accumulation (a captured step is one batch), or with what needs the host inside
// the step or a real device (`with_host_work`: --memory-timeline, --predict-memory,
// --fit-batch, --detect-anomaly).
void check_cuda_graph(bool cuda_graph, mg::Device device, int64_t accum, bool with_host_work);

class GraphedStep {
 public:
  // One optimizer step on `batch`, returning its loss (what train_epoch runs per batch).
  using Step = std::function<mg::Tensor(const mg::data::Batch& batch)>;

  explicit GraphedStep(mg::Device device) : device_(device) {}

  // Runs `step` on `batch` (eagerly and captured, replayed, or eagerly) and returns the
  // loss, which the next call may overwrite.
  mg::Tensor run(const mg::data::Batch& batch, const Step& step);

 private:
  mg::Device device_;
  mg::data::Batch static_batch_;  // what the captured step reads: each batch is copied in
  mg::Tensor loss_;               // what the captured step writes
  std::optional<mg::cuda::CapturedStep> captured_;
};

}  // namespace examples
