// core/determinism.h — the process-wide switch of deterministic algorithms, after PyTorch's
// torch.use_deterministic_algorithms: off (default), a GPU kernel may add in an order that
// varies from run to run (float atomics) where that is faster; on, every kernel that would
// is replaced by one that adds in a fixed order, so two runs of the same program with the
// same seeds on the same GPU and library versions give the same bits.
//
// What it changes (docs/reliability.md, "Determinism", lists them with their cost):
//   embedding backward (cuda/kernels/embedding.cu): positions sorted by row, each row
//     summed by one warp in position order, instead of float atomics;
//   fused attention backward (cuda/kernels/attention_backward.cu,
//     attention_simt_backward.cu): each key block writes its share of dQ to its own slice
//     of the workspace, and the slices are summed in key order, instead of float atomics
//     into one accumulator (more WORKSPACE: one dQ per block of keys);
//   cuDNN convolutions: only engines cuDNN does not mark nondeterministic, and none of
//     memgrad's fused ones (as cuda::set_cudnn_deterministic(true)).
// The CPU's kernels are deterministic either way (for a fixed number of threads).
//
// A kernel with no deterministic form that runs while the switch is on throws an mg::Error
// naming itself (scatter_add on CUDA, the backward of gather and index_select), as
// PyTorch does.
#pragma once

namespace mg {

void set_deterministic_algorithms(bool deterministic);
bool deterministic_algorithms();

}  // namespace mg
