// tests/fuzz/fuzz_checkpoint.cpp — libFuzzer target for resuming a training run: the gpt
// example's load_checkpoint (examples/gpt/checkpoint.h) on top of load_run_checkpoint
// (examples/common/run_checkpoint.h) and mg::load_checkpoint (training/checkpoint.h), which
// read the safetensors file's metadata, its run.* fields, the generators, and the model's,
// AdamW's, the GradScaler's and the schedule's state. A truncated or altered
// checkpoint must be refused with an error naming it.
//
// Each input is resumed twice: by a float32 run and by an fp16 run (whose GradScaler has
// state to load), each built as the gpt program builds them, once per process.
#include <optional>
#include <string>

#include "examples/common/mixed_precision.h"
#include "examples/gpt/checkpoint.h"
#include "examples/gpt/training.h"
#include "fuzz_support.h"
#include "tiny_gpt.h"

namespace {

struct Run {
  explicit Run(std::optional<mg::DType> amp)
      : model(fuzz::tiny_gpt_options()),
        optimizer(gpt::make_optimizer(model, 1e-3)),
        precision(amp, mg::Device::cpu()),
        scheduler(optimizer, fuzz::kTinyWarmupSteps, fuzz::kTinyRunSteps, 0.1) {}

  mg::nn::GPT model;
  mg::optim::AdamW optimizer;
  examples::MixedPrecision precision;
  mg::optim::WarmupCosineLR scheduler;
  mg::Generator windows;
};

void resume(Run& run, const std::string& path) {
  try {
    gpt::load_checkpoint(path, run.model, run.optimizer,
                         {.precision = run.precision, .scheduler = run.scheduler, .windows = run.windows},
                         fuzz::kTinyRunSteps);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run float32_run(std::nullopt), float16_run(mg::DType::Float16);
  const std::string path = fuzz::write_file("input-checkpoint.safetensors", data, size);
  resume(float32_run, path);
  resume(float16_run, path);
  return 0;
}
