// examples/memory_lab/detach_clone.cpp — experiment "detach_clone": what detach() and
// clone() allocate, and what each keeps alive when only a slice of a tensor is kept.
//
// detach() makes a new handle to the same storage without history; clone() copies the
// elements into a new storage. The catch: a detached slice still holds its source's whole
// storage, a cloned one only its own elements.
#include <memgrad/autograd/copy.h>
#include <memgrad/autograd/grad_mode.h>
#include <memgrad/core/factory.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"

namespace memory_lab {
namespace {

// A (1024, 4096) float32 tensor: 16 MiB, a multiple of the allocator's 512-byte rounding,
// so allocated bytes equal the tensor's bytes exactly.
constexpr int64_t kRows = 1024;
constexpr int64_t kColumns = 4096;
constexpr int64_t kTensorBytes = kRows * kColumns * 4;
// The slice kept "for logging": one row, 16 KiB.
constexpr int64_t kSliceBytes = kColumns * 4;

// Allocated bytes still held after the source is dropped and only its first row is kept,
// detached or cloned.
int64_t bytes_kept_by_row(mg::Device device, bool clone_it) {
  mg::NoGradGuard no_grad;  // a slice of a result, as an evaluation loop would keep it
  MemoryProbe probe(device);
  mg::Tensor source = mg::randn({kRows, kColumns}, {.device = device});
  mg::Tensor row = source.narrow(0, 0, 1);
  const mg::Tensor kept = clone_it ? mg::clone(row) : mg::detach(row);
  row = mg::Tensor();
  source = mg::Tensor();
  return probe.allocated();
}

}  // namespace

Result run_detach_clone(mg::Device device) {
  const mg::Tensor source = mg::randn({kRows, kColumns}, {.device = device, .requires_grad = true});
  MemoryProbe probe(device);
  const mg::Tensor detached = mg::detach(source);
  const int64_t detach_bytes = probe.allocated();
  probe.restart();
  const mg::Tensor cloned = mg::clone(source);
  const int64_t clone_bytes = probe.allocated();
  const bool shares_storage = detached.storage() == source.storage();

  const int64_t detached_row_keeps = bytes_kept_by_row(device, false);
  const int64_t cloned_row_keeps = bytes_kept_by_row(device, true);

  Result result;
  result.measurements = {
      bytes("detach_allocated_bytes", "allocated by detach() of a 1024x4096 float32", detach_bytes, "0"),
      bytes("clone_allocated_bytes", "allocated by clone() of it", clone_bytes,
            "1024 x 4096 x 4 B = " + with_commas(kTensorBytes)),
      bytes("detached_row_keeps_bytes", "held by a detached row once its source is dropped", detached_row_keeps,
            "the whole source, " + with_commas(kTensorBytes)),
      bytes("cloned_row_keeps_bytes", "held by a cloned row once its source is dropped", cloned_row_keeps,
            "4096 x 4 B = " + with_commas(kSliceBytes)),
  };
  const bool claim_holds = detach_bytes == 0 && shares_storage && clone_bytes == kTensorBytes;
  result.verdict = claim_holds ? Verdict::True : Verdict::False;
  result.why = "detach() allocated " + with_commas(detach_bytes) + " B (it shares the storage) and clone() " +
               with_commas(clone_bytes) + " B, the tensor's size; but a detached row keeps its whole source alive (" +
               with_commas(detached_row_keeps) + " B), a cloned row only itself (" + with_commas(cloned_row_keeps) +
               " B).";
  return result;
}

}  // namespace memory_lab
