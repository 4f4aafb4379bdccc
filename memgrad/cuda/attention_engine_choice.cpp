// cuda/attention_engine_choice.cpp — running fused attention on the engine the setting
// and Auto's timing choose (see the header).
#include "memgrad/cuda/attention_engine_choice.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "memgrad/core/determinism.h"
#include "memgrad/core/error.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/hold_stream.h"
#include "memgrad/cuda/runtime.h"
#if MG_WITH_CUDNN
#include "memgrad/cuda/cudnn/attention_plans.h"
#endif

namespace mg::cuda::attention {

namespace {

struct Choices {
  std::mutex mutex;
  std::unordered_map<AttentionKey, AttentionEngine, AttentionKeyHash> engines;
};
Choices& choices() {
  static auto* all = new Choices;  // leaked on purpose: read until the process ends
  return *all;
}

std::array<int64_t, 3> row_strides(const Tensor& tensor) {
  return {tensor.strides()[0], tensor.strides()[1], tensor.strides()[2]};
}

// 16-byte aligned data and row strides: what the cuDNN graph's tensors declare.
bool aligned_16(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* tensor : tensors) {
    if (reinterpret_cast<uintptr_t>(tensor->raw_data()) % 16 != 0) return false;
    const int64_t per_16_bytes = 16 / static_cast<int64_t>(element_size(tensor->dtype()));
    for (int dim = 0; dim < 3; ++dim) {
      if (tensor->strides()[dim] % per_16_bytes != 0) return false;
    }
  }
  return true;
}

AttentionProblem common_problem(const Tensor& q, const Tensor& k, const AttentionParams& params) {
  AttentionProblem problem;
  problem.dtype = q.dtype();
  problem.batch = q.sizes()[0];
  problem.heads = q.sizes()[1];
  problem.query_len = q.sizes()[2];
  problem.key_len = k.sizes()[2];
  problem.head_dim = q.sizes()[3];
  problem.causal = params.is_causal;
  problem.dropout_p = params.dropout_p;
  return problem;
}

bool stream_is_capturing(Device device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MG_CUDA_CHECK(cudaStreamIsCapturing(current_stream(device), &status));
  return status != cudaStreamCaptureStatusNone;
}

// Milliseconds one `run()` takes on the device: the median of kRounds rounds of kRepeats
// runs queued behind a held stream, after one untimed run (lazy loading, first-touch).
// As cuda/cudnn/conv_engines.cpp's time_plan, whose NOTE says why the stream is held.
template <typename Run>
float device_ms(Device device, const Run& run) {
  constexpr int kRounds = 3, kRepeats = 2, kHoldMicroseconds = 200;
  const Stream stream = Stream::current(device);
  run();
  std::array<float, kRounds> times{};
  for (float& time : times) {
    Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
    hold_stream(stream, kHoldMicroseconds);
    start.record(stream);
    for (int i = 0; i < kRepeats; ++i) run();
    end.record(stream);
    end.synchronize();
    time = Event::elapsed_ms(start, end) / kRepeats;
  }
  std::sort(times.begin(), times.end());
  return times[kRounds / 2];
}

std::optional<AttentionEngine> remembered_choice(const AttentionKey& key) {
  Choices& all = choices();
  std::lock_guard lock(all.mutex);
  auto found = all.engines.find(key);
  if (found == all.engines.end()) return std::nullopt;
  return found->second;
}

AttentionEngine remember_choice(const AttentionKey& key, AttentionEngine engine) {
  Choices& all = choices();
  std::lock_guard lock(all.mutex);
  return all.engines.try_emplace(key, engine).first->second;  // another thread's choice wins
}

[[noreturn]] void refuse(const AttentionProblem& problem, const char* reason) {
  const char* direction = problem.direction == AttentionDirection::Forward ? "forward" : "backward";
  mg::detail::throw_error(mg::detail::str_cat(
      "scaled_dot_product_attention ", direction, ": the attention engine is set to cudnn, but ", reason, " (q (",
      problem.batch, ", ", problem.heads, ", ", problem.query_len, ", ", problem.head_dim, "), keys ", problem.key_len,
      ", ", dtype_name(problem.dtype), problem.causal ? ", causal" : "", ", dropout ", problem.dropout_p,
      "). Hint: set_attention_engine(AttentionEngine::Auto) runs cuDNN where it applies and memgrad's kernels "
      "elsewhere."));
}

// Runs a call whose setting is Cudnn or Auto (the header says how Auto chooses);
// `run_cudnn(plan)` runs cuDNN's plan for `problem`.
template <typename RunOwn, typename RunCudnn>
void run_on_chosen_engine(const AttentionProblem& problem, Device device, AttentionEngine setting,
                          const RunOwn& run_own, const RunCudnn& run_cudnn) {
#if MG_WITH_CUDNN
  const char* reason = cudnn_attention_unsupported_reason(problem);
  if (setting == AttentionEngine::Cudnn) {
    if (reason != nullptr) refuse(problem, reason);
    const cudnn::AttentionPlan& plan = cudnn::attention_plan(problem, device);
    if (!plan.runnable()) {
      refuse(problem, problem.deterministic ? "cuDNN offered no engine for this attention graph among the "
                                              "deterministic ones (deterministic algorithms are on)"
                                            : "cuDNN offered no engine for this attention graph within "
                                              "cudnn_workspace_limit()");
    }
    return run_cudnn(plan);
  }
  const bool deterministic_backward = problem.direction == AttentionDirection::Backward && problem.deterministic;
  if (reason != nullptr || deterministic_backward) return run_own();
  const AttentionKey key = make_attention_key(problem, device);
  std::optional<AttentionEngine> engine = remembered_choice(key);
  if (!engine) {
    // NOTE: not while capturing: the timing waits on events, and even building a plan is
    // kept out of a capture. That call runs ours; the next eager call times.
    if (stream_is_capturing(device)) return run_own();
    const cudnn::AttentionPlan& plan = cudnn::attention_plan(problem, device);
    AttentionEngine faster = AttentionEngine::Own;
    if (plan.runnable()) {
      const float own_ms = device_ms(device, run_own);
      const float cudnn_ms = device_ms(device, [&] { run_cudnn(plan); });
      if (cudnn_ms < own_ms) faster = AttentionEngine::Cudnn;
    }
    engine = remember_choice(key, faster);
  }
  if (*engine == AttentionEngine::Cudnn) return run_cudnn(cudnn::attention_plan(problem, device));
  run_own();
#else
  if (setting == AttentionEngine::Cudnn) refuse(problem, "memgrad was built without cuDNN");
  run_own();
#endif
}

}  // namespace

AttentionProblem forward_problem(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                                 const Tensor& output) {
  AttentionProblem problem = common_problem(q, k, params);
  problem.direction = AttentionDirection::Forward;
  problem.aligned_16 = aligned_16({&q, &k, &v, &output});
  problem.strides[AttentionProblem::Q] = row_strides(q);
  problem.strides[AttentionProblem::K] = row_strides(k);
  problem.strides[AttentionProblem::V] = row_strides(v);
  problem.strides[AttentionProblem::Output] = row_strides(output);
  return problem;
}

AttentionProblem backward_problem(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& output, const AttentionParams& params, const Tensor& grad_q,
                                  const Tensor& grad_k, const Tensor& grad_v) {
  AttentionProblem problem = forward_problem(q, k, v, params, output);
  problem.direction = AttentionDirection::Backward;
  problem.deterministic = deterministic_algorithms();
  problem.aligned_16 = problem.aligned_16 && aligned_16({&grad_output, &grad_q, &grad_k, &grad_v});
  problem.strides[AttentionProblem::GradOutput] = row_strides(grad_output);
  problem.strides[AttentionProblem::GradQ] = row_strides(grad_q);
  problem.strides[AttentionProblem::GradK] = row_strides(grad_k);
  problem.strides[AttentionProblem::GradV] = row_strides(grad_v);
  return problem;
}

void forward_on_chosen_engine(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& params,
                              const Tensor& output, const Tensor& log_sum_exp, OwnForward own) {
  auto run_own = [&] { own(q, k, v, params, output, log_sum_exp); };
  const AttentionEngine setting = attention_engine();
  if (setting == AttentionEngine::Own) return run_own();
  const AttentionProblem problem = forward_problem(q, k, v, params, output);
  auto run_cudnn = [&](const auto& plan) {
#if MG_WITH_CUDNN
    const cudnn::AttentionOperands data{.q = q.raw_data(), .k = k.raw_data(), .v = v.raw_data(),
                                        .output = output.raw_data(), .log_sum_exp = log_sum_exp.raw_data()};
    cudnn::run_attention_plan(plan, problem, q.device(), data, static_cast<float>(params.scale));
#endif
  };
  run_on_chosen_engine(problem, q.device(), setting, run_own, run_cudnn);
}

void backward_on_chosen_engine(const Tensor& grad_output, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& output, const Tensor& log_sum_exp, const AttentionParams& params,
                               const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, OwnBackward own) {
  auto run_own = [&] { own(grad_output, q, k, v, output, log_sum_exp, params, grad_q, grad_k, grad_v); };
  const AttentionEngine setting = attention_engine();
  if (setting == AttentionEngine::Own) return run_own();
  const AttentionProblem problem = backward_problem(grad_output, q, k, v, output, params, grad_q, grad_k, grad_v);
  auto run_cudnn = [&](const auto& plan) {
#if MG_WITH_CUDNN
    const cudnn::AttentionOperands data{.q = q.raw_data(), .k = k.raw_data(), .v = v.raw_data(),
                                        .output = output.raw_data(), .log_sum_exp = log_sum_exp.raw_data(),
                                        .grad_output = grad_output.raw_data(), .grad_q = grad_q.raw_data(),
                                        .grad_k = grad_k.raw_data(), .grad_v = grad_v.raw_data()};
    cudnn::run_attention_plan(plan, problem, q.device(), data, static_cast<float>(params.scale));
#endif
  };
  run_on_chosen_engine(problem, q.device(), setting, run_own, run_cudnn);
}

size_t attention_engine_choices() {
  Choices& all = choices();
  std::lock_guard lock(all.mutex);
  return all.engines.size();
}

AttentionEngine attention_engine_chosen(const AttentionProblem& problem, Device device) {
  Choices& all = choices();
  std::lock_guard lock(all.mutex);
  auto found = all.engines.find(make_attention_key(problem, device));
  return found == all.engines.end() ? AttentionEngine::Auto : found->second;
}

void clear_attention_engine_choices() {
  Choices& all = choices();
  std::lock_guard lock(all.mutex);
  all.engines.clear();
}

}  // namespace mg::cuda::attention
