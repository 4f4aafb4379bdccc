// nn/checkpoint_sequential.cpp — a Sequential's modules cut into checkpointed segments.
#include "memgrad/nn/checkpoint_sequential.h"

#include <memory>

#include "memgrad/autograd/checkpoint.h"

namespace mg::nn {

namespace {

// Runs modules [begin, end) of `sequence` one after another.
Tensor run_range(const Sequential& sequence, size_t begin, size_t end, const Tensor& input) {
  Tensor output = input;
  for (size_t index = begin; index < end; ++index) output = (*sequence[index])(output);
  return output;
}

}  // namespace

Tensor checkpoint_sequential(Sequential& sequence, int segments, const Tensor& input) {
  MG_CHECK(segments >= 1 && static_cast<size_t>(segments) <= sequence.size(), "checkpoint_sequential: segments=",
           segments, " must be between 1 and the number of modules in the Sequential (", sequence.size(), ")");
  size_t segment_size = sequence.size() / static_cast<size_t>(segments);
  size_t last_begin = segment_size * static_cast<size_t>(segments - 1);
  // NOTE: the nodes keep their segment's function until backward; when the Sequential is
  // held by a shared_ptr they share it, so the modules stay alive that long. One that lives
  // elsewhere (on the stack) is referred to without owning and must outlive the backward.
  std::shared_ptr<Sequential> owner = std::static_pointer_cast<Sequential>(sequence.weak_from_this().lock());
  if (!owner) owner = std::shared_ptr<Sequential>(std::shared_ptr<Sequential>(), &sequence);
  Tensor output = input;
  for (size_t begin = 0; begin < last_begin; begin += segment_size) {
    size_t end = begin + segment_size;
    output = checkpoint([owner, begin, end](const Tensor& x) { return run_range(*owner, begin, end, x); }, output);
  }
  return run_range(sequence, last_begin, sequence.size(), output);
}

}  // namespace mg::nn
