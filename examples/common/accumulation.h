// examples/common/accumulation.h — gradient accumulation: one optimizer step over several
// micro-batches, so that a step sees more samples than fit in memory at once.
//
//   optimizer.zero_grad();
//   for (int64_t i = 0; i < micro_batches; ++i) {
//     mg::Tensor loss = mg::cross_entropy(model(inputs[i]), targets[i]);  // micro-batch mean
//     backward_micro_batch(loss, micro_batches);  // adds its share to .grad, frees its graph
//   }
//   optimizer.step();
//
// Backward adds into the leaves' .grad, so after the last micro-batch .grad holds the
// gradient of the mean loss over all the step's samples (exactly so when the micro-batches
// are the same size). Each micro-batch's backward releases its own graph, so the activation
// peak is one micro-batch's, whatever the count.
//
// NOTE: batch norm normalises each micro-batch with that micro-batch's statistics, so a
// model with batch norm (ResNet) is not computing the large batch's forward, and dropout
// draws other masks than one large batch would; a model with neither (the MNIST MLP) is.
#pragma once

#include <cstdint>

#include <memgrad/core/tensor.h>

namespace examples {

// Backpropagates loss / micro_batches (just loss when micro_batches is 1, so that a step
// without accumulation computes what it always did).
void backward_micro_batch(const mg::Tensor& loss, int64_t micro_batches);

// Optimizer steps that `batches` micro-batches make at `accum` per step; a shorter last
// step takes the remainder. What a learning-rate schedule counts.
int64_t optimizer_steps(int64_t batches, int64_t accum);

}  // namespace examples
