// examples/common/auto_accumulation.cpp — retrying a step that ran out of memory in smaller
// micro-batches; what a retry puts back; the --memory-cap and --auto-accum flags.
#include "examples/common/auto_accumulation.h"

#include <algorithm>
#include <cstdio>

#include <memgrad/autograd/grad_mode.h>
#include <memgrad/core/allocator/registry.h>
#include <memgrad/core/error.h>
#include <memgrad/memory/memory_cap.h>
#include "examples/common/accumulation.h"
#include "examples/common/memory_prediction.h"

namespace examples {

const char* const kOutOfMemoryUsage =
    R"(  --memory-cap BYTES       memgrad reserves at most BYTES on the device (as PyTorch's
                           set_per_process_memory_fraction): 512MiB, 2GiB, ...
  --auto-accum             on out of memory in a training step, split each batch into
                           micro-batches half as large and retry the step (the same
                           effective batch and mathematics as --accum), saying so
)";

void add_out_of_memory_flags(FlagHandlers& flags, SwitchHandlers& switches, OutOfMemoryFlags& values) {
  flags["--memory-cap"] = [&values](const std::string& text) { values.memory_cap = parse_bytes("--memory-cap", text); };
  switches["--auto-accum"] = [&values] { values.auto_accum = true; };
}

std::vector<std::string> with_out_of_memory_flags(std::vector<std::string> flags) {
  flags.push_back("--memory-cap");
  flags.push_back("--auto-accum");
  return flags;
}

void check_out_of_memory_flags(const OutOfMemoryFlags& flags, bool distributed, bool cuda_graph) {
  if (!flags.auto_accum) return;
  if (distributed) {
    throw UsageError("--auto-accum is for one process: every rank would have to split its batches alike, in the "
                     "same step; a data-parallel run takes a smaller --batch (or --accum) on every rank");
  }
  if (cuda_graph) {
    throw UsageError("--auto-accum does not go with --cuda-graph: a captured step replays the micro-batches it was "
                     "captured with");
  }
}

void apply_memory_cap(const OutOfMemoryFlags& flags, mg::Device device) {
  if (flags.memory_cap) mg::memory::set_memory_cap(device, static_cast<size_t>(*flags.memory_cap));
}

StepStart::StepStart(const mg::nn::Module& model)
    : dropout_(mg::default_generator().state()), buffers_(model.buffers()) {
  mg::NoGradGuard no_grad;
  saved_.reserve(buffers_.size());
  for (const mg::Tensor& buffer : buffers_) saved_.push_back(buffer.clone());
}

void StepStart::restore() const {
  mg::NoGradGuard no_grad;
  mg::default_generator().set_state(dropout_);
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(saved_[i]);
}

void AutoAccumulation::run(mg::Device device, int64_t batches, int64_t rows,
                           const std::function<void(int64_t micro_batch_rows)>& step,
                           const std::function<void()>& restart) {
  while (true) {
    const int64_t micro_batch_rows = micro_batch_rows_ > 0 ? std::min(micro_batch_rows_, rows) : rows;
    try {
      step(micro_batch_rows);
      return;
    } catch (const mg::OutOfMemoryError& error) {
      if (!enabled_) throw;
      const int64_t micro_batches = batches * piece_count(rows, micro_batch_rows);
      MG_CHECK(micro_batch_rows > 1, "out of memory at micro-batch ", micro_batch_ + 1, " of ", micro_batches,
               " with micro-batches of one sample: --auto-accum cannot split them further. Hint: a smaller model, ",
               "--checkpoint (where the program has it), or more memory (--memory-cap). The allocator said: ",
               error.what());
      restart();
      mg::allocator_for(device).empty_cache();
      // Micro-batches half as large, rounded up (pieces of 10 rows become 5 and 5, of 5
      // become 3 and 2): every piece holds a sample.
      micro_batch_rows_ = (micro_batch_rows + 1) / 2;
      std::printf("out of memory at micro-batch %lld of %lld; going on with %lld micro-batches of %lld\n",
                  static_cast<long long>(micro_batch_ + 1), static_cast<long long>(micro_batches),
                  static_cast<long long>(batches * piece_count(rows, micro_batch_rows_)),
                  static_cast<long long>(micro_batch_rows_));
      std::fflush(stdout);
    }
  }
}

}  // namespace examples
