// distributed/coalesced_broadcast.h — broadcasting many tensors (a model's parameters and
// buffers) in few collectives, as PyTorch's _broadcast_coalesced: one collective per chunk
// of tensors instead of one per tensor (a ResNet-50 has 320 parameters and buffers).
//
// Tensors of one dtype and device are packed, in the order given, into flat staging
// tensors of at most `chunk_bytes` (a chunk is closed before a tensor that would take it
// past that; a larger tensor is a chunk of its own). Every chunk's broadcast is started
// before any is waited for; then each rank copies the root's values out of the staging.
//
// Memory: the staging tensors are COMMUNICATION, all alive at once during the call and
// freed before it returns: together exactly the bytes of the tensors staged. A chunk that
// holds one contiguous tensor is broadcast in place, without staging.
#pragma once

#include <cstdint>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/distributed/process_group.h"

namespace mg::distributed {

// PyTorch's default (DDP's broadcast_bucket_size).
inline constexpr int64_t kDefaultBroadcastChunkBytes = int64_t{250} << 20;

// Every rank's `tensors` become rank `root`'s; every rank must pass tensors of the same
// dtypes and sizes in the same order. Returns once they have.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root = 0,
                         int64_t chunk_bytes = kDefaultBroadcastChunkBytes);

// The bytes broadcast_coalesced stages (COMMUNICATION) for `tensors`: what its peak adds.
int64_t coalesced_staging_bytes(const std::vector<Tensor>& tensors,
                                int64_t chunk_bytes = kDefaultBroadcastChunkBytes);

}  // namespace mg::distributed
