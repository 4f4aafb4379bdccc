// examples/common/auto_accumulation.cpp — retrying a step that ran out of memory in smaller
// micro-batches; the --memory-cap and --auto-accum flags.
#include "examples/common/auto_accumulation.h"

#include <algorithm>
#include <cstdio>

#include <memgrad/core/allocator/registry.h>
#include <memgrad/core/error.h>
#include <memgrad/memory/memory_cap.h>
#include "examples/common/memory_prediction.h"

namespace examples {
namespace {

int64_t piece_rows(int64_t rows, int64_t pieces) { return (rows + pieces - 1) / pieces; }

}  // namespace

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

void apply_memory_cap(const OutOfMemoryFlags& flags, mg::Device device) {
  if (flags.memory_cap) mg::memory::set_memory_cap(device, static_cast<size_t>(*flags.memory_cap));
}

mg::data::Batch batch_piece(const mg::data::Batch& batch, int64_t piece, int64_t pieces) {
  if (pieces == 1) return batch;
  const int64_t rows = batch.inputs.size(0);
  const int64_t size = piece_rows(rows, pieces);
  const int64_t start = piece * size;
  MG_ASSERT(start < rows, "piece ", piece, " of ", pieces, " of a batch of ", rows, " is empty");
  const int64_t length = std::min(size, rows - start);
  return {.inputs = batch.inputs.narrow(0, start, length), .targets = batch.targets.narrow(0, start, length)};
}

void AutoAccumulation::run(mg::Device device, int64_t batches, int64_t rows,
                           const std::function<void(int64_t splits)>& step, const std::function<void()>& restart) {
  while (true) {
    try {
      step(splits_);
      return;
    } catch (const mg::OutOfMemoryError& error) {
      if (!enabled_) throw;
      const int64_t micro_batches = batches * splits_;
      const int64_t failed_rows = piece_rows(rows, splits_);
      MG_CHECK(failed_rows > 1, "out of memory at micro-batch ", micro_batch_ + 1, " of ", micro_batches,
               " with micro-batches of one sample: --auto-accum cannot split them further. Hint: a smaller model, ",
               "--checkpoint (where the program has it), or more memory (--memory-cap). The allocator said: ",
               error.what());
      restart();
      mg::allocator_for(device).empty_cache();
      // Micro-batches half as large (rounded up), as many as that takes: every piece holds
      // a sample (doubling the pieces of 10 rows to 8 would leave pieces of 2 and empty ones).
      splits_ = piece_rows(rows, piece_rows(failed_rows, 2));
      std::printf("out of memory at micro-batch %lld of %lld; going on with %lld micro-batches of %lld\n",
                  static_cast<long long>(micro_batch_ + 1), static_cast<long long>(micro_batches),
                  static_cast<long long>(batches * splits_), static_cast<long long>(piece_rows(rows, splits_)));
      std::fflush(stdout);
    }
  }
}

}  // namespace examples
