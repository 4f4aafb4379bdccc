// autograd/selective_checkpoint.cpp — the thread's stack of keeping and replaying scopes,
// and the order check between a selective checkpoint's forward and its recompute.
#include "memgrad/autograd/selective_checkpoint.h"

#include <cstring>

#include "memgrad/autograd/copy.h"

namespace mg::autograd {

namespace selective {

thread_local Frame* innermost_frame = nullptr;

namespace {

constexpr const char* kNodeName = "SelectiveCheckpointBackward";
constexpr const char* kSameOpsHint =
    "Hint: a checkpointed function must run the same ops, on the same shapes, every time it is called; do not let "
    "it depend on state that changes between the forward and backward (or use a whole-block checkpoint, which "
    "keeps no op's output).";

// The innermost replaying scope; keeping scopes inside it store what it replays.
Frame* replaying_frame() {
  Frame* frame = innermost_frame;
  while (frame != nullptr && !frame->replaying) frame = frame->outer;
  return frame;
}

void push(Frame& frame) {
  frame.outer = innermost_frame;
  innermost_frame = &frame;
}

void pop(Frame& frame) {
  MG_ASSERT(innermost_frame == &frame, "selective checkpoint scopes must end in reverse order");
  innermost_frame = frame.outer;
}

}  // namespace

std::optional<std::vector<Tensor>> take_kept(OpKind kind, const char* op, const Shape& sizes, DType dtype) {
  Frame* frame = replaying_frame();
  if (frame == nullptr || !frame->policy->keeps(kind)) return std::nullopt;
  KeptResults& kept = *frame->kept;
  const size_t index = frame->next;
  MG_CHECK(index < kept.size(), "selective checkpoint (keeping ", frame->policy->describe(), "): the recompute for "
           "backward runs more kept ops than the forward did: its kept op #", index + 1, " is ", op, " giving ",
           sizes, " ", dtype, ", but the forward kept only ", kept.size(), ". ", kSameOpsHint);
  KeptResult& entry = kept[index];
  MG_CHECK(entry.kind == kind && std::strcmp(entry.op, op) == 0 && entry.sizes == sizes && entry.dtype == dtype,
           "selective checkpoint (keeping ", frame->policy->describe(), "): the recompute for backward differs from "
           "the forward at kept op #", index + 1, " of ", kept.size(), ": the forward ran ", entry.op, " giving ",
           entry.sizes, " ", entry.dtype, " there, the recompute runs ", op, " giving ", sizes, " ", dtype, ". ",
           kSameOpsHint);
  ++frame->next;
  std::vector<Tensor> results;
  results.reserve(entry.results.size());
  for (SavedTensor& saved : entry.results) {
    // NOTE: a new handle: the op makes it the output of the node it records, which the
    // stored tensor must not become (the node would then hold the recomputed graph).
    Tensor result = saved.unpack(kNodeName);
    results.push_back(result.defined() ? detach(result) : Tensor());
    if (frame->release) saved.release();
  }
  return results;
}

void keep(OpKind kind, const char* op, const std::vector<Tensor>& results) {
  for (Frame* frame = innermost_frame; frame != nullptr && !frame->replaying;
       frame = frame->outer) {
    if (!frame->policy->keeps(kind)) continue;
    KeptResult entry{kind, op, results.front().sizes(), results.front().dtype(), {}};
    entry.results.reserve(results.size());
    for (const Tensor& result : results) entry.results.emplace_back(result);
    frame->kept->push_back(std::move(entry));
  }
}

}  // namespace selective

KeepScope::KeepScope(const CheckpointPolicy& policy, KeptResults& kept)
    : frame_{&policy, &kept, /*replaying=*/false, /*release=*/false} {
  selective::push(frame_);
}

KeepScope::~KeepScope() { selective::pop(frame_); }

ReplayScope::ReplayScope(const CheckpointPolicy& policy, KeptResults& kept, bool release)
    : frame_{&policy, &kept, /*replaying=*/true, release} {
  selective::push(frame_);
}

ReplayScope::~ReplayScope() { selective::pop(frame_); }

void ReplayScope::check_all_replayed() const {
  const KeptResults& kept = *frame_.kept;
  if (frame_.next == kept.size()) return;
  const KeptResult& skipped = kept[frame_.next];
  MG_CHECK(false, "selective checkpoint (keeping ", frame_.policy->describe(), "): the recompute for backward ran "
           "only ", frame_.next, " of the ", kept.size(), " kept ops the forward ran (the first it did not run: #",
           frame_.next + 1, ", ", skipped.op, " giving ", skipped.sizes, " ", skipped.dtype, "). ",
           selective::kSameOpsHint);
}

}  // namespace mg::autograd
