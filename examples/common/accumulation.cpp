// examples/common/accumulation.cpp — a micro-batch's share of an accumulated step.
#include "examples/common/accumulation.h"

#include <memgrad/autograd/elementwise.h>
#include <memgrad/core/error.h>

namespace examples {

void backward_micro_batch(const mg::Tensor& loss, int64_t micro_batches) {
  MG_ASSERT(micro_batches >= 1, "a step has at least one micro-batch");
  if (micro_batches == 1) {
    loss.backward();
    return;
  }
  (loss * (1.0 / static_cast<double>(micro_batches))).backward();
}

int64_t optimizer_steps(int64_t batches, int64_t accum) { return (batches + accum - 1) / accum; }

}  // namespace examples
