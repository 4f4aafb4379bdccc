// cuda/attention_engine_choice.h — the fused attention entries' engine choice on CUDA
// (cuda/plan/attention_engine.h says what the engines are): cuda/kernels/attention.cu
// hands each nonempty call here with our kernel for its dtype, and the call runs on ours
// or on cuDNN's.
//
// Auto, the first call of a problem (cuda/plan/attention_engine.h's AttentionKey): both
// engines run on the call's own tensors, one untimed run each and then 3 rounds of 2
// runs behind a held stream (cuda/hold_stream.h), the median round kept; the faster
// engine is remembered for the problem and then runs the call. The cost, once per problem
// and direction: 2 x (1 + 3 x 2) = 14 extra runs, 3 stream holds of 200 us per engine,
// cuDNN's plan building (its heuristics, and a runtime-compiled kernel where its engine
// compiles one) and a host wait for the timing events. Not yet measured on a GPU.
// The results of the timing runs are overwritten by the final run; the inputs are only
// read. Never while the stream is being captured into a CUDA graph (the waits would
// break the capture): then a problem not yet timed runs on our kernels, unremembered.
// Under deterministic_algorithms() Auto keeps the backward on our deterministic kernels;
// a forced cuDNN engine runs its deterministic graph (cuda/cudnn/attention_plans.h).
#pragma once

#include <cstddef>

#include "memgrad/core/kernels.h"
#include "memgrad/cuda/plan/attention_engine.h"

namespace mg::cuda::attention {

using OwnForward = void (*)(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                            const Tensor& output, const Tensor& log_sum_exp);
using OwnBackward = void (*)(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                             const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);

// The kernel table's contracts (core/kernel_list.h), operands checked, device current,
// sizes nonempty. A forced cuDNN engine that does not apply throws mg::Error naming why.
void forward_on_chosen_engine(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                              const Tensor& output, const Tensor& log_sum_exp, OwnForward own);
void backward_on_chosen_engine(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                               const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, OwnBackward own);

// The problem a call describes (strides, alignment, determinism), for the key and the rules.
AttentionProblem forward_problem(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                                 const Tensor& output);
AttentionProblem backward_problem(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& output, const AttentionParams& params, const Tensor& grad_q,
                                  const Tensor& grad_k, const Tensor& grad_v);

// Auto's remembered choices (tests, reports): how many problems were timed, and the
// engine kept for one (Auto when not timed yet). Clearing makes the next calls time again.
size_t attention_engine_choices();
AttentionEngine attention_engine_chosen(const AttentionProblem& problem, Device device);
void clear_attention_engine_choices();

}  // namespace mg::cuda::attention
