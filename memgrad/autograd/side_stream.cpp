// autograd/side_stream.cpp — the backward's side streams: one per (thread, device), made
// at first use, and the marks that order them with the main stream.
#include "memgrad/autograd/side_stream.h"

#include <atomic>
#include <bit>

#include "memgrad/autograd/anomaly_mode.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/core/graph_capture.h"
#ifdef MG_WITH_CUDA
#include <array>
#include <deque>
#include <optional>
#include <vector>

#include "memgrad/cuda/runtime.h"
#endif

namespace mg::autograd {

namespace {

std::atomic<bool> weight_gradients_on_side{false};
thread_local uint64_t runs_on_side = 0;
// The node the engine is running on this thread (the innermost, under a nested backward).
thread_local NodeStreamScope* running_node = nullptr;

#ifdef MG_WITH_CUDA
// One SideStreamWork's run not yet waited for by the main stream: its end on the side
// stream, and the main stream's tensors it reads, held until the main stream waits for it
// (from then on the main stream's next work comes after it, so the allocator may hand
// their blocks to it at once).
struct PieceInFlight {
  cuda::Event done;
  std::vector<Tensor> operands;
};

// How many pieces may be in flight before the main stream waits for the oldest. Measured
// on an H200 (2026-12-03, fp16 channels_last, eager): with 1, ResNet-50 b128 gained
// nothing (the main stream waited for each weight gradient before the next batch norm);
// with 2, 0.1 ms (as much as record_stream gave) for 110 MiB more reserved; with 3, less
// on ResNet-50 and 64 MiB more reserved on ResNet-18.
constexpr size_t kPiecesInFlight = 2;

struct SideStream {
  std::optional<cuda::Stream> stream;
  cuda::Event main_mark;  // the main stream's work that the side stream's next work waits for
  cuda::Event side_done;  // the side stream's work, which a join waits for
  std::deque<PieceInFlight> in_flight;  // oldest first
  // A join came since the side stream last waited for the main stream: the main stream may
  // have freed blocks the side stream made, which the side stream may reuse only after.
  bool joined_since_wait = false;
};

struct SideStreams {
  std::array<SideStream, cuda::kMaxDevices> by_device;
  uint64_t unjoined = 0;  // bit d: device d's side stream has work the main stream did not wait for

  SideStream& of(Device device) {
    SideStream& side = by_device[device.index];
    if (!side.stream) side.stream.emplace(device);
    return side;
  }
  void given_work(Device device) { unjoined |= uint64_t{1} << device.index; }
};
thread_local SideStreams side_streams;

// The side stream waits for the main stream's work so far.
void wait_for_main(SideStream& side, Device device) {
  side.main_mark.record(cuda::Stream::current(device));
  side.main_mark.block(*side.stream);
  side.joined_since_wait = false;
}

bool is_side_stream(const SideStream& side, Device device) {
  return side.stream && cuda::current_stream(device) == side.stream->handle();
}
#endif

}  // namespace

void set_weight_gradients_on_side_stream(bool on) { weight_gradients_on_side.store(on, std::memory_order_relaxed); }

bool weight_gradients_on_side_stream() { return weight_gradients_on_side.load(std::memory_order_relaxed); }

uint64_t side_stream_runs() { return runs_on_side; }

// ---- SideStreamWork ----

SideStreamWork::SideStreamWork(Device device, bool use) : device_(device) {
#ifdef MG_WITH_CUDA
  available_ = use && weight_gradients_on_side_stream() && device.is_cuda() && in_backward() &&
               !graph_capture_underway() && !is_anomaly_enabled();
  if (!available_) return;
  SideStream& side = side_streams.of(device);
  // A node already running on the side stream needs no mark: its work is in order there.
  if (is_side_stream(side, device)) return;
  side.main_mark.record(cuda::Stream::current(device));
  marked_ = true;
#else
  (void)use;
#endif
}

void SideStreamWork::run(uint32_t output, std::initializer_list<Tensor> operands, const std::function<void()>& work) {
  if (!available_) {
    work();
    return;
  }
#ifdef MG_WITH_CUDA
  SideStream& side = side_streams.of(device_);
  if (marked_) {
    // NOTE: a bounded number of pieces behind, not record_stream: with the host far ahead
    // of the device, blocks noted on the side stream would wait for it for milliseconds,
    // and the main stream would take new segments meanwhile (2 GB more reserved for
    // ResNet-50). The main stream waits for the oldest piece here, after the node's own
    // work on it (which the mark precedes), and that piece's operands go.
    const cuda::Stream main = cuda::Stream::current(device_);
    while (side.in_flight.size() >= kPiecesInFlight) {
      side.in_flight.front().done.block(main);
      side.in_flight.pop_front();
    }
    side.main_mark.block(*side.stream);
    side.joined_since_wait = false;
  }
  {
    cuda::StreamGuard on_side(*side.stream);
    work();
  }
  if (marked_) {
    PieceInFlight& piece = side.in_flight.emplace_back();
    piece.done.record(*side.stream);
    for (const Tensor& operand : operands) {
      if (operand.defined()) piece.operands.push_back(operand);
    }
  }
  side_streams.given_work(device_);
  ++runs_on_side;
  if (running_node != nullptr && output < 64) running_node->outputs_on_side_ |= uint64_t{1} << output;
#endif
}

// ---- NodeStreamScope ----

#ifdef MG_WITH_CUDA
struct NodeStreamScope::OnSideStream {
  explicit OnSideStream(const cuda::Stream& stream) : guard(stream) {}
  cuda::StreamGuard guard;
};
#else
struct NodeStreamScope::OnSideStream {};
#endif

NodeStreamScope::NodeStreamScope(bool on_side_stream, Device device) : outer_(running_node) {
  running_node = this;
#ifdef MG_WITH_CUDA
  if (!on_side_stream) return;
  SideStream& side = side_streams.of(device);
  if (side.joined_since_wait) wait_for_main(side, device);
  on_side_ = std::make_unique<OnSideStream>(*side.stream);
  outputs_on_side_ = ~uint64_t{0};
  side_streams.given_work(device);
  ++runs_on_side;
#else
  (void)on_side_stream;
  (void)device;
#endif
}

NodeStreamScope::~NodeStreamScope() {
  on_side_.reset();
  running_node = outer_;
}

bool NodeStreamScope::made_on_side_stream(size_t output) const {
  return output < 64 && (outputs_on_side_ >> output & 1) != 0;
}

void join_side_streams() {
#ifdef MG_WITH_CUDA
  while (side_streams.unjoined != 0) {
    const int index = std::countr_zero(side_streams.unjoined);
    const Device device = Device::cuda(index);
    SideStream& side = side_streams.by_device[index];
    side.side_done.record(*side.stream);
    side.side_done.block(cuda::Stream::current(device));
    side.joined_since_wait = true;
    side.in_flight.clear();
    side_streams.unjoined &= ~(uint64_t{1} << index);
  }
#endif
}

}  // namespace mg::autograd
