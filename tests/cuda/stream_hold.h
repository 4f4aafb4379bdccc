// tests/cuda/stream_hold.h — holds a CUDA stream at a point until the test releases it (or a
// time limit passes), so a test can queue work behind the hold and see whether the host got
// back before that work ran: code that synchronises with the stream cannot return while the
// hold lasts. Test cases that assert the host never waited carry the tag [host-sync]: under
// compute-sanitizer, which may serialise work, scripts/gpu-sanitize judges them by the
// tool's reports alone.
//
// NOTE: the hold is a host function spinning on a flag. A limit, not a plain flag, ends it:
// code under test that waits for the stream would otherwise wait forever, and a test should
// fail, not hang; timed_out() then says the host waited.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "memgrad/cuda/check.h"
#include "memgrad/cuda/runtime.h"

namespace mg_test {

class StreamHold {
 public:
  explicit StreamHold(const mg::cuda::Stream& stream, std::chrono::milliseconds limit = std::chrono::seconds(10))
      : stream_(stream.handle()) {
    state_.deadline = std::chrono::steady_clock::now() + limit;
    MG_CUDA_CHECK(cudaLaunchHostFunc(stream_, &spin, &state_));
  }
  ~StreamHold() {
    release();
    (void)cudaStreamSynchronize(stream_);  // the host function reads state_ until then
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  void release() { state_.released.store(true); }
  // Whether the limit, not release(), ended the hold.
  bool timed_out() const { return state_.timed_out.load(); }

 private:
  struct State {
    std::atomic<bool> released{false};
    std::atomic<bool> timed_out{false};
    std::chrono::steady_clock::time_point deadline;
  };
  static void CUDART_CB spin(void* data) {
    auto* state = static_cast<State*>(data);
    while (!state->released.load()) {
      if (std::chrono::steady_clock::now() > state->deadline) {
        state->timed_out.store(true);
        return;
      }
      std::this_thread::yield();
    }
  }
  cudaStream_t stream_;
  State state_;
};

}  // namespace mg_test
