// cuda/nccl_communicator.h — one NCCL communicator with its communication stream, its
// collectives in flight, and the watchdog that turns a lost collective into an error. What
// distributed/'s NCCL backend (distributed/nccl_process_group.cpp) runs its collectives
// through; here in cuda/ because it touches the CUDA runtime and NCCL, as cuBLAS's and
// cuDNN's handles do. Built when NCCL was found (MG_WITH_NCCL).
//
// Ordering, all on the device (the host never waits unless asked to):
//   caller's current stream --ready event--> communication stream: the NCCL kernel
//   communication stream --done event--> the stream that calls wait()
// The tensors a collective uses are noted on the communication stream (record_stream), so
// the caching allocator does not hand their memory out again before the kernel is done,
// even when the tensors die first.
//
// Timeouts: the communicator is non-blocking (ncclConfig_t::blocking = 0), so no NCCL call
// can hang the host. A watchdog thread polls, every few milliseconds, the collectives in
// flight (their done events) and ncclCommGetAsyncError. When one is past its deadline, or
// NCCL reports an error (a peer died), it aborts the communicator (ncclCommAbort: the
// stuck kernels end, so a host blocked on the device wakes up), prints the reason, and
// from then on every call on the communicator throws it as mg::Error. The watchdog, not
// the caller, must find it: a caller that synchronises with its stream (item(), a copy to
// the host) would otherwise wait forever for a kernel that waits for a dead rank.
#pragma once

#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

// Throws mg::Error for an NCCL status other than success (and in-progress, which a
// non-blocking communicator answers while it works), naming the call, file and line.
void check_nccl(ncclResult_t status, const char* call, const char* file, int line, ncclComm_t comm);
#define MG_NCCL_CHECK(call, comm) ::mg::cuda::check_nccl((call), #call, __FILE__, __LINE__, (comm))

struct NcclCollective {
  std::string description;  // "all_reduce (sum) of a float32 tensor of shape [4] on cuda:0"
  Event done;         // recorded on the communication stream after the NCCL kernel
  std::chrono::milliseconds timeout{};
  std::chrono::steady_clock::time_point deadline;  // its start + timeout
};

// Enqueues one NCCL call on the communication stream (the handle given).
using NcclEnqueue = std::function<ncclResult_t(ncclComm_t comm, cudaStream_t stream)>;

// Told once, with its description, when a collective is lost (the communicator aborted).
using LostCollectiveHandler = std::function<void(const std::string& description)>;

class NcclCommunicator {
 public:
  // Joins the communicator of `world_size` ranks named by `id` as `rank`, on `device`;
  // throws mg::Error when the others do not join within `timeout`.
  NcclCommunicator(Device device, int rank, int world_size, const ncclUniqueId& id,
               std::chrono::milliseconds timeout, LostCollectiveHandler on_lost);
  // Flushes the collectives in flight (ncclCommFinalize, bounded by the timeout) and
  // destroys the communicator; never throws. The communication stream goes back to a
  // pool: the allocator may still record events on it for tensors its collectives used.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  Device device() const { return device_; }
  const Stream& stream() const { return *stream_; }

  // Starts a collective after the work enqueued so far on the calling thread's current
  // stream; `tensors` are the memory it reads and writes.
  std::shared_ptr<NcclCollective> launch(std::string description, const std::vector<Tensor>& tensors,
                                     std::chrono::milliseconds timeout, const NcclEnqueue& enqueue);
  bool is_completed(const NcclCollective& collective);
  // The calling thread's current stream waits for the collective (the host does not).
  void wait(const NcclCollective& collective);
  // The host waits for the collective (polling, so that a timeout still ends the wait).
  void synchronize(const NcclCollective& collective);

 private:
  void watch();
  // With mutex_ held: drops the collectives done; declares a loss past a deadline or on an
  // NCCL error.
  void poll_in_flight();
  // With mutex_ held: records the loss, aborts the communicator, tells on_lost_ and stderr.
  void declare_lost(std::string message);
  // With mutex_ held: throws the loss, if any.
  void throw_if_lost() const;
  // With mutex_ held: waits while a non-blocking NCCL call is in progress; a loss after
  // `deadline`.
  void await(ncclResult_t status, const char* call, std::chrono::steady_clock::time_point deadline,
             const std::string& what);

  Device device_;
  int rank_;
  int world_size_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<Stream> stream_;  // the communication stream (from the pool)
  Event ready_;                     // the caller's stream, marked at each launch
  LostCollectiveHandler on_lost_;
  std::chrono::milliseconds timeout_;

  std::mutex mutex_;  // held around every NCCL call and every use of the fields below
  std::vector<std::shared_ptr<NcclCollective>> in_flight_;
  std::string lost_;     // the reason the communicator was aborted, once it was
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread watchdog_;  // last: started once everything above exists
};

}  // namespace mg::cuda
