// distributed/coalesced_broadcast.cpp — chunking by dtype and device, staging, and copying
// back (coalesced_broadcast.h says what and why).
#include "memgrad/distributed/coalesced_broadcast.h"

#include <map>
#include <memory>
#include <utility>

#include "memgrad/autograd/grad_mode.h"
#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/distributed/tensor_group_key.h"

namespace mg::distributed {
namespace {

struct Chunk {
  std::vector<Tensor> tensors;
  int64_t numel = 0;
  bool staged() const { return tensors.size() > 1 || !tensors.front().is_contiguous(); }
};

// The chunks of `tensors`, grouped by dtype and device (groups in order of first
// appearance; within a group the tensors keep their order).
std::vector<Chunk> make_chunks(const std::vector<Tensor>& tensors, int64_t chunk_bytes) {
  MG_CHECK(chunk_bytes > 0, "broadcast_coalesced: the chunk size must be positive, got ", chunk_bytes, " bytes.");
  std::vector<Chunk> chunks;
  std::map<TensorGroupKey, size_t> open_chunk;  // dtype and device -> index into chunks
  for (const Tensor& tensor : tensors) {
    MG_CHECK(tensor.defined(), "broadcast_coalesced: tensor ", &tensor - tensors.data(), " is undefined.");
    const TensorGroupKey key = tensor_group_key(tensor);
    auto open = open_chunk.find(key);
    const int64_t bytes = static_cast<int64_t>(tensor.nbytes());
    if (open != open_chunk.end()) {
      Chunk& chunk = chunks[open->second];
      const int64_t chunk_size = chunk.numel * static_cast<int64_t>(tensor.element_size());
      if (chunk_size + bytes <= chunk_bytes) {
        chunk.tensors.push_back(tensor);
        chunk.numel += tensor.numel();
        continue;
      }
    }
    open_chunk[key] = chunks.size();
    chunks.push_back({{tensor}, tensor.numel()});
  }
  return chunks;
}

}  // namespace

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root, int64_t chunk_bytes) {
  NoGradGuard no_grad;  // parameters are written in place, outside autograd
  struct InFlight {
    Chunk chunk;
    Tensor staging;  // (numel,), COMMUNICATION; undefined when broadcast in place
    std::shared_ptr<Work> work;
  };
  std::vector<InFlight> in_flight;
  for (Chunk& chunk : make_chunks(tensors, chunk_bytes)) {
    InFlight flight{std::move(chunk), Tensor(), nullptr};
    if (!flight.chunk.staged()) {
      flight.work = group.broadcast(flight.chunk.tensors.front(), root);
    } else {
      const Tensor& first = flight.chunk.tensors.front();
      flight.staging = empty({flight.chunk.numel}, {.dtype = first.dtype(), .device = first.device(),
                                                     .category = MemoryCategory::Communication});
      if (group.rank() == root) {
        int64_t offset = 0;
        for (const Tensor& tensor : flight.chunk.tensors) {
          make_view(flight.staging, tensor.sizes(), contiguous_strides(tensor.sizes()), offset).copy_(tensor);
          offset += tensor.numel();
        }
      }
      flight.work = group.broadcast(flight.staging, root);
    }
    in_flight.push_back(std::move(flight));
  }
  for (InFlight& flight : in_flight) {
    flight.work->wait();
    if (!flight.staging.defined() || group.rank() == root) continue;
    int64_t offset = 0;
    for (const Tensor& tensor : flight.chunk.tensors) {
      tensor.copy_(make_view(flight.staging, tensor.sizes(), contiguous_strides(tensor.sizes()), offset));
      offset += tensor.numel();
    }
  }
}

int64_t coalesced_staging_bytes(const std::vector<Tensor>& tensors, int64_t chunk_bytes) {
  int64_t bytes = 0;
  for (const Chunk& chunk : make_chunks(tensors, chunk_bytes)) {
    if (chunk.staged()) bytes += chunk.numel * static_cast<int64_t>(chunk.tensors.front().element_size());
  }
  return bytes;
}

}  // namespace mg::distributed
