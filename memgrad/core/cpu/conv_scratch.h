// core/cpu/conv_scratch.h — the scratch the CPU convolution (core/cpu/conv.cpp) borrows, by
// shape, so that the simulated device can borrow the same when it stands in for the CPU
// (memory/cpu_scratch_model.cpp) and a predicted peak matches a measured one to the byte.
#pragma once

#include "memgrad/core/kernels.h"
#include "memgrad/core/shape.h"

namespace mg::cpu {

// The WORKSPACE tensors of one convolution call, given its input (N, C, H, W), weight
// (K, C/g, R, S) and output (N, K, P, Q) sizes: one im2col column buffer per thread that
// runs (threads, C/g*R*S, P*Q), and for the weight gradient one private partial sum per
// thread (threads, K, C/g*R*S). Threads: OpenMP's current maximum, at most one per sample.
struct ConvScratchShapes {
  Shape column_buffers;
  Shape weight_partials;
};
ConvScratchShapes conv_scratch_shapes(const Shape& input, const Shape& weight, const Shape& output,
                                      const Window2d& window);

}  // namespace mg::cpu
