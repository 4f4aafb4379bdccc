// tests/training/test_soak.cpp — a short soak run for CI: a small GPT trained for 150 steps
// on the CPU with an evaluation every 25, the caching allocator's reserved bytes,
// allocated bytes and segment count recorded after every step. The criterion (also in
// docs/reliability.md): after a warm-up of the first 30 steps (past the first
// evaluation, when AdamW's state and every cached size exist), no step ends with more
// reserved bytes, more segments or more allocated bytes than the warm-up's last step did
// (flat, not merely bounded); and at the end no tensor the steps allocated is still
// alive besides parameters, gradients and optimizer state (Recorder::leaked_tensors).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/memory/recorder.h"
#include "memgrad/nn/gpt.h"
#include "memgrad/optim/adam.h"

namespace {

struct StepMemory {
  int64_t reserved = 0, allocated = 0, segments = 0;
};

StepMemory cpu_memory() {
  const mg::MemoryStats stats = mg::allocator_for(mg::Device::cpu()).stats();
  return {stats.reserved_bytes.current, stats.allocated_bytes.current, stats.segment_count.current};
}

}  // namespace

TEST_CASE("a 150-step CPU run with evaluations holds reserved, allocated and segments flat after warm-up, "
          "and leaks nothing", "[training][soak]") {
  // NOTE: 10 to 14 s on the shared 2-core CPU machine (2 layers, 64 wide, block 32, batch 4).
  constexpr int64_t kSteps = 150, kWarmup = 30, kEvalEvery = 25, kBatch = 4, kBlock = 32, kVocab = 64;
  mg::Generator init(0), data(1);
  mg::nn::GPT model({.n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = kBlock, .vocab_size = kVocab,
                     .dropout = 0.1},
                    &init);
  mg::optim::AdamW optimizer(model.parameters(), {.lr = 1e-3});
  mg::memory::Recorder recorder({.device = mg::Device::cpu()});
  recorder.start();

  std::vector<StepMemory> after_step;
  for (int64_t step = 0; step < kSteps; ++step) {
    {
      const mg::Tensor tokens = mg::randint(0, kVocab, {kBatch, kBlock + 1}, {.dtype = mg::DType::Int64}, &data);
      optimizer.zero_grad();
      mg::Tensor loss = model.loss(tokens.narrow(1, 0, kBlock).contiguous(), tokens.narrow(1, 1, kBlock).contiguous());
      loss.backward();
      optimizer.step();
      if ((step + 1) % kEvalEvery == 0) {  // an evaluation batch of another size, without autograd
        const mg::NoGradGuard no_grad;
        model.eval();
        const mg::Tensor held_out = mg::randint(0, kVocab, {2 * kBatch, kBlock + 1}, {.dtype = mg::DType::Int64}, &data);
        const double eval_loss = model.loss(held_out.narrow(1, 0, kBlock).contiguous(),
                                            held_out.narrow(1, 1, kBlock).contiguous()).item<double>();
        CHECK(eval_loss > 0);
        model.train();
      }
    }
    after_step.push_back(cpu_memory());
    recorder.next_step();
  }
  recorder.stop();

  const StepMemory& warm = after_step[kWarmup - 1];
  int64_t most_reserved = 0, most_allocated = 0, most_segments = 0;
  for (size_t step = kWarmup; step < after_step.size(); ++step) {
    most_reserved = std::max(most_reserved, after_step[step].reserved);
    most_allocated = std::max(most_allocated, after_step[step].allocated);
    most_segments = std::max(most_segments, after_step[step].segments);
  }
  INFO("after warm-up: reserved " << warm.reserved << ", allocated " << warm.allocated << ", segments "
                                  << warm.segments);
  CHECK(most_reserved <= warm.reserved);
  CHECK(most_allocated <= warm.allocated);
  CHECK(most_segments <= warm.segments);
  CHECK(after_step.back().allocated == warm.allocated);  // the same tensors live after every step
  for (int64_t step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    CHECK(recorder.leaked_tensors(step).empty());
  }
}
