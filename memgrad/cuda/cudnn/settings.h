// cuda/cudnn/settings.h — the process-wide switches of CUDA convolution, after PyTorch's
// torch.backends.cudnn: whether cuDNN runs at all (enabled), how it picks an algorithm
// (benchmark), whether it may pick engines whose sums vary from run to run (deterministic),
// whether float32 may use TF32 tensor cores (allow_tf32), whether it fuses other ops' work
// into convolutions (fusion and backward_fusion, memgrad's own), and how much
// scratch memory an algorithm may borrow (workspace_limit).
//
// They exist in every CUDA build, with or without cuDNN, so a program sets them without
// #if; without cuDNN, convolution always runs the im2col + cuBLAS kernels and the switches
// only record their values. Switching them mid-run is safe: the algorithm cache keys on
// benchmark, deterministic and the math mode that allow_tf32 selects.
#pragma once

#include <cstddef>

namespace mg::cuda {

// True when memgrad was built with cuDNN (MG_WITH_CUDNN); then conv2d on CUDA uses it
// unless set_cudnn_enabled(false).
bool cudnn_is_available();

// On (default): cuDNN runs CUDA convolutions. Off: the im2col + cuBLAS kernels do — the
// reference the cuDNN path is tested against, kept working in every build.
void set_cudnn_enabled(bool enabled);
bool cudnn_enabled();

// Off (default): the engine is the first of cuDNN's heuristics (mode A, then the fallback
// list) that runs within cudnn_workspace_limit(). On: the first call per shape times every
// such engine and keeps the fastest — slower once, faster after.
void set_cudnn_benchmark(bool benchmark);
bool cudnn_benchmark();

// On (default, as torch.backends.cudnn.allow_tf32): float32 convolutions may run on TF32
// tensor cores (~10 mantissa bits in the products). Off: only engines without tensor
// cores, full float32. Separate from set_allow_tf32 (matmuls, default off), as in
// PyTorch. 16-bit convolutions always use tensor cores; float64 never does.
void set_cudnn_allow_tf32(bool allow);
bool cudnn_allow_tf32();

// Off (default): any engine the other switches allow. On: only engines cuDNN does not mark
// nondeterministic (as torch.backends.cudnn.deterministic), so the same inputs give the
// same bits on every run: some backward engines add partial sums with atomics, in whatever
// order the blocks finish. Tests that compare two runs bit for bit (a CUDA graph's replay
// against eager steps) turn it on; it may cost speed where the fastest engine is
// nondeterministic.
void set_cudnn_deterministic(bool deterministic);
bool cudnn_deterministic();

// On (default): where cuDNN can fuse work into a convolution, and where it pays, it does.
// Today that is batch norm's per-channel statistics, generated in the epilogue of the
// convolution before it (cuda/cudnn/conv.h's conv2d_with_statistics; nn::Bottleneck and
// nn::BasicBlock ask for it when training in float16 or bfloat16 channels_last), which
// saves batch norm's statistics pass over the activation; the fused and unfused steps
// differ by rounding only. Off: the two run apart. Never in deterministic mode: cuDNN does
// not say in which order the epilogue adds its partial sums.
// On by default since 2026-12-02, commit 8f74ff5 (docs/history/benchmarks.md): it had been
// off because ResNet-50's step was slower with it, which one convolution explained, the
// 7x7 stem with 3 input channels, whose only fused engine (runtime-compiled) took 1.71 ms
// a step against 0.21 ms plain. The kernel table now fuses only convolutions with a
// multiple of 8 input channels (cuda/kernels/conv.cu).
void set_cudnn_fusion(bool fusion);
bool cudnn_fusion();
// On (default): where cuDNN can, and where it pays (cuda/kernels/conv.cu: 16-bit
// channels_last, 2^16 values a channel or more), a convolution's backward data also applies
// the ReLU's backward and forms batch norm's two backward sums in its epilogue, for the
// batch norm + ReLU before it (cuda/cudnn/conv.h's conv2d_backward_input_relu_batch_norm,
// taken by autograd where a convolution is the only consumer of batch_norm_relu's output,
// autograd/relu_batch_norm_node.h). That saves batch norm's summing pass over the gradient
// and its input; the result differs from the unfused one by rounding only. Off: the two run
// apart. Never in deterministic mode. Separate from set_cudnn_fusion because the two pay
// differently: ResNet-50 b128 fp16 channels_last took 17.27 ms a step with this one on and
// 17.45 ms off on the H200, at the same peak (docs/history/benchmarks.md, 2026-12-02).
void set_cudnn_backward_fusion(bool fusion);
bool cudnn_backward_fusion();

// The most workspace bytes one convolution may borrow from the caching allocator (default
// 1 GiB). Engines that need more are skipped; in benchmark mode it also caps the
// scratch memory the timing run borrows.
void set_cudnn_workspace_limit(size_t bytes);
size_t cudnn_workspace_limit();

}  // namespace mg::cuda
