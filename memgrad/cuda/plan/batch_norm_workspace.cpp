// cuda/plan/batch_norm_workspace.cpp — the size of batch norm's workspace (see the header).
#include "memgrad/cuda/plan/batch_norm_workspace.h"

#include "memgrad/core/factory.h"
#include "memgrad/core/kernels.h"

namespace mg::cuda {

int64_t batch_norm_workspace_elements(int64_t channels, int64_t chunks, bool with_partials) {
  const int64_t partial_sums = with_partials ? 2 * chunks * channels : 0;
  return kBatchNormCoefficients * channels + partial_sums;
}

Tensor batch_norm_channel_operand(const Tensor& values, DType accumulate) {
  if (!values.defined() || (values.dtype() == accumulate && values.is_contiguous())) return values;
  Tensor converted = empty(values.sizes(), {.dtype = accumulate, .device = values.device(),
                                            .category = MemoryCategory::Workspace});
  kernels(values.device()).copy(values, converted);
  return converted;
}

}  // namespace mg::cuda
