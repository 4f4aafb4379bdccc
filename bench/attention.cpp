// bench/attention.cpp — times scaled_dot_product_attention forward, and forward + backward,
// on CUDA, for side-by-side comparison with bench/torch_attention.py (same flags, same JSON
// fields, the same work: q, k, v (B, H, T, D) leaves requiring grad, out = sdpa(q, k, v),
// out.backward(grad_output), the leaves' gradients reset to none before each step).
//
//   bench_attention --batch 8 --heads 12 --seq 1024 --head-dim 64 --dtype bf16 --causal
//                   [--backend fused|math|auto] [--engine own|cudnn|auto] [--dropout P]
//                   [--steps N] [--warmup W]
//
// --engine picks what runs the fused backend on CUDA (cuda/plan/attention_engine.h):
// memgrad's kernels, cuDNN's fused flash attention, or per shape the faster of the two
// (auto, the default: the warm-up's first step times both, so the timed steps run the
// choice).
//
// Timing as examples/common/step_benchmark.h measures a training step: after --warmup
// untimed steps, every one of --steps steps is bracketed by CUDA events on the current
// stream and the median interval is reported, first for steps of the forward alone (the
// graph is still recorded and its saved tensors released with the output), then for
// forward + backward. peak_allocated is the allocator's peak over one forward + backward
// step after the warm-up, from the state a step starts in (q, k, v and grad_output);
// activation_bytes what one forward keeps for backward (its ACTIVATION bytes).
//
// Output: one JSON line on stdout. Exit codes: 0 done, 1 an error while running, 2 a bad
// command line.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>

#include <memgrad/autograd/attention.h>
#include <memgrad/core/device.h>
#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/io/json.h>
#include <memgrad/memory/snapshot.h>
#include <memgrad/core/memory_category.h>
#include <memgrad/core/random.h>
#include <memgrad/cuda/plan/attention_engine.h>
#include "examples/common/cli.h"
#include "examples/common/step_benchmark.h"

namespace {

using examples::UsageError;

struct Args {
  int64_t batch = 8, heads = 12, seq = 1024, head_dim = 64;
  std::string dtype_name = "bf16";
  mg::DType dtype = mg::DType::BFloat16;
  bool causal = false;
  double dropout = 0.0;
  std::string backend_name = "fused";
  mg::AttentionBackend backend = mg::AttentionBackend::Fused;
  mg::cuda::AttentionEngine engine = mg::cuda::AttentionEngine::Auto;
  int64_t warmup = 10, steps = 50;
  bool help = false;
};

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [--batch N] [--heads N] [--seq N] [--head-dim N] [--dtype bf16|fp16|fp32]\n"
         "       [--causal] [--dropout P] [--backend fused|math|auto] [--engine own|cudnn|auto]\n"
         "       [--warmup N] [--steps N]\n"
         "\n"
         "Times scaled_dot_product_attention on CUDA: the median over --steps steps (after\n"
         "--warmup) of the forward alone and of forward + backward, and the peak allocated bytes\n"
         "of one forward + backward step; prints one JSON line, as bench/torch_attention.py.\n"
         "--engine: the fused backend on memgrad's kernels (own), cuDNN's (cudnn) or the faster\n"
         "of the two for the shape, timed at its first call (auto).\n"
         "Defaults: --batch 8 --heads 12 --seq 1024 --head-dim 64 --dtype bf16 --backend fused\n"
         "--engine auto --warmup 10 --steps 50, not causal, no dropout.\n";
}

Args parse_args(int argc, char** argv) {
  Args args;
  const examples::FlagHandlers flags = {
      {"--batch", [&](const std::string& value) { args.batch = examples::parse_count("--batch", value); }},
      {"--heads", [&](const std::string& value) { args.heads = examples::parse_count("--heads", value); }},
      {"--seq", [&](const std::string& value) { args.seq = examples::parse_count("--seq", value); }},
      {"--head-dim", [&](const std::string& value) { args.head_dim = examples::parse_count("--head-dim", value); }},
      {"--dtype",
       [&](const std::string& value) {
         if (value == "bf16") args.dtype = mg::DType::BFloat16;
         else if (value == "fp16") args.dtype = mg::DType::Float16;
         else if (value == "fp32") args.dtype = mg::DType::Float32;
         else throw UsageError("--dtype must be bf16, fp16 or fp32, got '" + value + "'");
         args.dtype_name = value;
       }},
      {"--dropout",
       [&](const std::string& value) {
         args.dropout = examples::parse_number<double>("--dropout", value);
         if (!(args.dropout >= 0.0 && args.dropout < 1.0)) throw UsageError("--dropout must be in [0, 1), got " + value);
       }},
      {"--backend",
       [&](const std::string& value) {
         if (value == "fused") args.backend = mg::AttentionBackend::Fused;
         else if (value == "math") args.backend = mg::AttentionBackend::Math;
         else if (value == "auto") args.backend = mg::AttentionBackend::Auto;
         else throw UsageError("--backend must be fused, math or auto, got '" + value + "'");
         args.backend_name = value;
       }},
      {"--engine",
       [&](const std::string& value) {
         try {
           args.engine = mg::cuda::parse_attention_engine(value);
         } catch (const mg::Error& error) {
           throw UsageError(std::string("--engine: ") + error.what());
         }
       }},
      {"--warmup", [&](const std::string& value) { args.warmup = examples::parse_count("--warmup", value, 0); }},
      {"--steps", [&](const std::string& value) { args.steps = examples::parse_count("--steps", value); }},
  };
  const examples::SwitchHandlers switches = {
      {"--help", [&] { args.help = true; }},
      {"-h", [&] { args.help = true; }},
      {"--causal", [&] { args.causal = true; }},
  };
  examples::parse_flags(argc, argv, flags, switches);
  return args;
}

int run(const Args& args) {
  const mg::Device device = mg::Device::cuda();
  mg::cuda::set_attention_engine(args.engine);
  mg::Generator generator(0);
  const mg::Shape sizes{args.batch, args.heads, args.seq, args.head_dim};
  auto leaf = [&]() {
    mg::Tensor tensor = mg::randn(sizes, {.dtype = args.dtype, .device = device}, &generator);
    tensor.set_memory_category(mg::MemoryCategory::Input);
    return tensor.requires_grad_();
  };
  const mg::Tensor q = leaf(), k = leaf(), v = leaf();
  mg::Tensor grad_output = mg::randn(sizes, {.dtype = args.dtype, .device = device}, &generator);
  grad_output.set_memory_category(mg::MemoryCategory::Input);
  mg::AttentionOptions options;
  options.is_causal = args.causal;
  options.dropout_p = args.dropout;
  options.backend = args.backend;
  const mg::AttentionBackend chosen = mg::attention_backend_for(q, k, v, options);

  auto reset_grads = [&] {
    for (const mg::Tensor* leaf_tensor : {&q, &k, &v}) leaf_tensor->set_grad(mg::Tensor());
  };
  const examples::StepMeasurement forward = examples::measure_steps(device, args.warmup, args.steps, [&] {
    reset_grads();
    mg::Tensor output = mg::scaled_dot_product_attention(q, k, v, options);
  });
  const examples::StepMeasurement forward_backward = examples::measure_steps(device, args.warmup, args.steps, [&] {
    reset_grads();
    mg::Tensor output = mg::scaled_dot_product_attention(q, k, v, options);
    output.backward(grad_output);
  });

  // The bytes one call keeps for backward: ACTIVATION while its graph is alive (q, k, v and
  // grad_output are INPUT, so only what the op saves counts).
  int64_t activation_bytes = 0;
  {
    reset_grads();
    mg::Tensor output = mg::scaled_dot_product_attention(q, k, v, options);
    activation_bytes = mg::memory::snapshot(device).category(mg::MemoryCategory::Activation).current;
  }

  mg::JsonWriter json;
  json.begin_object()
      .key("framework").value("memgrad")
      .key("op").value("sdpa")
      .key("backend").value(mg::attention_backend_name(chosen))
      .key("engine").value(mg::cuda::attention_engine_name(args.engine))
      .key("dtype").value(args.dtype_name)
      .key("B").value(args.batch)
      .key("H").value(args.heads)
      .key("T").value(args.seq)
      .key("D").value(args.head_dim)
      .key("causal").value(args.causal)
      .key("dropout").value(args.dropout)
      .key("warmup").value(args.warmup)
      .key("steps").value(args.steps)
      .key("ms_forward").value(forward.median_ms)
      .key("ms_forward_backward").value(forward_backward.median_ms)
      .key("peak_allocated").value(forward_backward.memory.peak_allocated_bytes)
      .key("activation_bytes").value(activation_bytes)
      .end_object();
  std::cout << json.str() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  return examples::run_main(
      argc, argv, "bench_attention",
      [&](int count, char** values) {
        args = parse_args(count, values);
        return !args.help;
      },
      usage, [&] { return run(args); });
}
