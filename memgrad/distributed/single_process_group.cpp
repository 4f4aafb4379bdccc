// distributed/single_process_group.cpp — collectives over a world of one: the sum and the
// average of one rank's tensor are that tensor, and so is what rank 0 broadcasts; gathering
// or scattering one chunk is a copy.
#include "memgrad/distributed/single_process_group.h"

#include "memgrad/autograd/grad_mode.h"

namespace mg::distributed {
namespace {

// Done when started: there is no other rank to wait for.
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

std::shared_ptr<Work> completed() { return std::make_shared<CompletedWork>(); }

// `output` gets `input`'s elements (the same count: one chunk for one rank), in order.
void copy_elements(const Tensor& output, const Tensor& input) {
  NoGradGuard no_grad;  // collectives move values, never autograd history
  output.copy_(make_view(input, output.sizes(), output.strides(), input.storage_offset()));
}

}  // namespace

SingleProcessGroup::SingleProcessGroup(Device device)
    : ProcessGroup(/*rank=*/0, /*size=*/1, /*local_rank=*/0, kDefaultCollectiveTimeout), device_(device) {}

std::shared_ptr<Work> SingleProcessGroup::start_all_reduce(const Tensor&, ReduceOp) { return completed(); }

std::shared_ptr<Work> SingleProcessGroup::start_broadcast(const Tensor&, int) { return completed(); }

std::shared_ptr<Work> SingleProcessGroup::start_reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp) {
  copy_elements(output, input);
  return completed();
}

std::shared_ptr<Work> SingleProcessGroup::start_all_gather(const Tensor& output, const Tensor& input) {
  copy_elements(output, input);
  return completed();
}

std::shared_ptr<Work> SingleProcessGroup::start_barrier() { return completed(); }

}  // namespace mg::distributed
