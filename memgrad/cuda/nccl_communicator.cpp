// cuda/nccl_communicator.cpp — an NCCL communicator's life: non-blocking start-up
// bounded by a timeout, collectives ordered by events, the watchdog, finalisation.
#include "memgrad/cuda/nccl_communicator.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/cuda/transfer.h"

namespace mg::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watchdog looks: a lost collective is declared at most this late.
constexpr std::chrono::milliseconds kWatchInterval{20};

// The communication streams of dead groups, handed to the next group on their device.
// NOTE: never destroyed (the pool itself is never freed): a tensor that a collective used
// carries the stream in the allocator's notes (record_stream), and when it dies, maybe
// long after its group, the allocator records an event on that stream.
class StreamPool {
 public:
  std::unique_ptr<Stream> acquire(Device device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = std::find_if(free_.begin(), free_.end(),
                             [&](const auto& stream) { return stream->device() == device; });
      if (it != free_.end()) {
        std::unique_ptr<Stream> stream = std::move(*it);
        free_.erase(it);
        return stream;
      }
    }
    return std::make_unique<Stream>(device);
  }
  void release(std::unique_ptr<Stream> stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(stream));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Stream>> free_;
};

StreamPool& stream_pool() {
  static StreamPool* pool = new StreamPool();  // never freed: see the NOTE above
  return *pool;
}

std::string nccl_text(ncclResult_t status, ncclComm_t comm) {
  std::string text = ncclGetErrorString(status);
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  if (last != nullptr && last[0] != '\0') text += mg::detail::str_cat(" (", last, ")");
  return text;
}

void pause(int polls) {
  if (polls < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(polls, 1000)));
  }
}

}  // namespace

void check_nccl(ncclResult_t status, const char* call, const char* file, int line, ncclComm_t comm) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  mg::detail::throw_error(
      mg::detail::str_cat(call, " failed at ", file, ":", line, ": ", nccl_text(status, comm)));
}

NcclCommunicator::NcclCommunicator(Device device, int rank, int world_size, const ncclUniqueId& id,
                           std::chrono::milliseconds timeout, LostCollectiveHandler on_lost)
    : device_(device),
      rank_(rank),
      world_size_(world_size),
      stream_(stream_pool().acquire(device)),
      on_lost_(std::move(on_lost)),
      timeout_(timeout) {
  DeviceGuard guard(device_);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; the watchdog bounds the waits
  const Clock::time_point deadline = Clock::now() + timeout;
  const ncclResult_t started = ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
  ncclResult_t state = started;
  for (int polls = 0; state == ncclInProgress && Clock::now() < deadline; ++polls) {
    pause(polls);
    ncclCommGetAsyncError(comm_, &state);
  }
  if (state != ncclSuccess) {
    const std::string reason =
        state == ncclInProgress
            ? mg::detail::str_cat("did not complete within ", timeout.count() / 1000.0,
                                  " s: not every rank joined. Hint: start all ",
                                  world_size, " ranks; give slow starters more time "
                                  "(ProcessGroupOptions::timeout)")
            : mg::detail::str_cat("failed: ", nccl_text(state, comm_), ". Hint: one GPU per rank "
                                  "(NCCL refuses two ranks on one GPU); NCCL_DEBUG=INFO says more");
    if (comm_ != nullptr) ncclCommAbort(comm_);
    stream_pool().release(std::move(stream_));
    mg::detail::throw_error(mg::detail::str_cat("init_process_group: NCCL's start-up on rank ", rank,
                                                " of ", world_size, " (", device_, ") ", reason, "."));
  }
  watchdog_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
  if (lost_.empty()) {
    // NOTE: errors are ignored here: a destructor may run at the process's end, when the
    // CUDA runtime may already be gone; there is nothing left to tell.
    (void)cudaSetDevice(device_.index);
    ncclResult_t state = ncclCommFinalize(comm_);
    const Clock::time_point deadline = Clock::now() + timeout_;
    for (int polls = 0; state == ncclInProgress && Clock::now() < deadline; ++polls) {
      pause(polls);
      ncclCommGetAsyncError(comm_, &state);
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      std::fprintf(stderr, "memgrad: an NCCL process group ended with collectives that did not "
                           "finish within %.1f s; aborting its communicator.\n",
                   timeout_.count() / 1000.0);
      ncclCommAbort(comm_);
    }
  }
  stream_pool().release(std::move(stream_));
}

std::shared_ptr<NcclCollective> NcclCommunicator::launch(std::string description,
                                                 const std::vector<Tensor>& tensors,
                                                 std::chrono::milliseconds timeout,
                                                 const NcclEnqueue& enqueue) {
  refuse_during_graph_capture("an NCCL collective", "run collectives outside the captured step.");
  auto collective = std::make_shared<NcclCollective>();
  collective->description = std::move(description);
  collective->timeout = timeout;
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_lost();
  ready_.record(Stream::current(device_));
  ready_.block(*stream_);
  for (const Tensor& tensor : tensors) record_stream(tensor, *stream_);
  collective->deadline = Clock::now() + timeout;
  await(enqueue(comm_, stream_->handle()), "the NCCL call", collective->deadline,
        collective->description);
  collective->done.record(*stream_);
  in_flight_.push_back(collective);
  return collective;
}

bool NcclCommunicator::is_completed(const NcclCollective& collective) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_lost();
  return collective.done.query();
}

void NcclCommunicator::wait(const NcclCollective& collective) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_lost();
  collective.done.block(Stream::current(device_));
}

void NcclCommunicator::synchronize(const NcclCollective& collective) {
  for (int polls = 0; !is_completed(collective); ++polls) pause(polls);
}

void NcclCommunicator::watch() {
  // The events and the communicator belong to device_; CUDA calls on this thread need it.
  (void)cudaSetDevice(device_.index);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && lost_.empty()) {
    wake_.wait_for(lock, kWatchInterval);
    if (stopping_) break;
    try {
      poll_in_flight();
    } catch (const Error& error) {  // a CUDA error while querying an event
      declare_lost(error.what());
    }
  }
}

void NcclCommunicator::poll_in_flight() {
  std::erase_if(in_flight_, [](const auto& collective) { return collective->done.query(); });
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  if (state != ncclSuccess && state != ncclInProgress) {
    declare_lost(mg::detail::str_cat(
        "NCCL reported an error on rank ", rank_, " of ", world_size_, " (", device_, ")",
        in_flight_.empty() ? std::string() : " during " + in_flight_.front()->description, ": ",
        nccl_text(state, comm_), ". Hint: another rank may have died; NCCL_DEBUG=WARN says more."));
    return;
  }
  const Clock::time_point now = Clock::now();
  for (const auto& collective : in_flight_) {
    if (now < collective->deadline) continue;
    declare_lost(mg::detail::str_cat(
        collective->description, " on rank ", rank_, " of ", world_size_,
        " did not complete within ", collective->timeout.count() / 1000.0,
        " s: another rank has not joined it (it died, is stuck, or called a different "
        "collective), or the stream it waits for never got there. Hint: every rank must call "
        "the same collectives in the same order; a rank that is slow for good reason needs a "
        "longer timeout (ProcessGroupOptions::timeout, ProcessGroup::set_timeout)."));
    return;
  }
}

void NcclCommunicator::declare_lost(std::string message) {
  lost_ = std::move(message);
  // The stuck kernels end, so whatever waits for them on the device (and a host blocked on
  // that) goes on; the results of the lost collectives are undefined.
  ncclCommAbort(comm_);
  in_flight_.clear();
  std::fprintf(stderr, "memgrad: %s\nmemgrad: the NCCL communicator was aborted.\n", lost_.c_str());
  std::fflush(stderr);
  if (on_lost_) on_lost_(lost_);
}

void NcclCommunicator::throw_if_lost() const {
  MG_CHECK(lost_.empty(), lost_, " This process group can no longer be used.");
}

void NcclCommunicator::await(ncclResult_t status, const char* call, Clock::time_point deadline,
                         const std::string& what) {
  ncclResult_t state = status;
  for (int polls = 0; state == ncclInProgress; ++polls) {
    if (Clock::now() >= deadline) {
      declare_lost(mg::detail::str_cat(what, " on rank ", rank_, " of ", world_size_,
                                       ": NCCL did not accept it within the timeout."));
      throw_if_lost();
    }
    pause(polls);
    ncclCommGetAsyncError(comm_, &state);
  }
  check_nccl(state, call, __FILE__, __LINE__, comm_);
}

}  // namespace mg::cuda
