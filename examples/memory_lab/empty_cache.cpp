// examples/memory_lab/empty_cache.cpp — experiment "empty_cache": what dropping a tensor
// (Python's `del`) gives back, and what empty_cache() adds.
//
// The caching allocator keeps freed blocks in its segments for the next tensor: dropping a
// tensor lowers *allocated* at once but not *reserved* (what the process holds from the
// device, and what nvidia-smi shows). empty_cache() returns the free segments to the device.
#include <memgrad/core/allocator/registry.h>
#include <memgrad/core/factory.h>
#include <memgrad/memory/snapshot.h>
#include "examples/memory_lab/experiment.h"
#include "examples/memory_lab/memory_probe.h"

namespace memory_lab {
namespace {

// 64 MiB of float32: a large request, which gets a segment of its own (rounded to 2 MiB),
// so the figures are the tensor's bytes exactly.
constexpr int64_t kElements = int64_t{16} << 20;
constexpr int64_t kTensorBytes = kElements * 4;

}  // namespace

Result run_empty_cache(mg::Device device) {
  mg::CachingAllocator& allocator = mg::allocator_for(device);
  allocator.empty_cache();  // start from no cached segments, whatever ran before
  MemoryProbe probe(device);

  mg::Tensor big = mg::empty({kElements}, {.device = device});
  const int64_t reserved_with_tensor = probe.reserved();
  big = mg::Tensor();  // del big
  const int64_t allocated_after_del = probe.allocated();
  const int64_t reserved_after_del = probe.reserved();
  big = mg::empty({kElements}, {.device = device});  // the next tensor of that size
  const int64_t reserved_after_reuse = probe.reserved();
  big = mg::Tensor();
  allocator.empty_cache();
  const int64_t reserved_after_empty_cache = probe.reserved();
  const mg::memory::Snapshot after = mg::memory::snapshot(device);

  Result result;
  result.measurements = {
      bytes("reserved_with_tensor_bytes", "reserved while a 64 MiB tensor lives", reserved_with_tensor,
            with_commas(kTensorBytes)),
      bytes("allocated_after_del_bytes", "allocated after dropping it (del)", allocated_after_del, "0"),
      bytes("reserved_after_del_bytes", "reserved after dropping it", reserved_after_del,
            with_commas(kTensorBytes) + ", cached"),
      bytes("reserved_after_reuse_bytes", "reserved after a new tensor of that size", reserved_after_reuse,
            with_commas(kTensorBytes) + ": the cached segment reused"),
      bytes("reserved_after_empty_cache_bytes", "reserved after dropping it and empty_cache()",
            reserved_after_empty_cache, "0"),
      bytes("total_allocated_after_empty_cache_bytes", "whole device: allocated after empty_cache()",
            after.allocated_bytes),
      bytes("total_reserved_after_empty_cache_bytes", "whole device: reserved after empty_cache()",
            after.reserved_bytes, "the allocated bytes, when no segment is partly used"),
  };
  // The claim's premise is that `del` alone does not free the memory. It does, for this
  // process (the next tensor reuses the segment); empty_cache() only hands it back.
  const bool cache_behaves = allocated_after_del == 0 && reserved_after_del >= kTensorBytes &&
                             reserved_after_reuse == reserved_after_del && reserved_after_empty_cache == 0;
  result.verdict = cache_behaves ? Verdict::Partly : Verdict::False;
  result.why = "after del, allocated fell to " + with_commas(allocated_after_del) + " B but reserved stayed at " +
               with_commas(reserved_after_del) + " B, which the next tensor reused without a new segment; "
               "empty_cache() returned it (reserved " + with_commas(reserved_after_empty_cache) +
               " B): it helps other processes and nvidia-smi's figure, not this process's tensors.";
  return result;
}

}  // namespace memory_lab
