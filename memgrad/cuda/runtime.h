// cuda/runtime.h — the CUDA runtime in RAII form: the current device (DeviceGuard),
// streams and events, each thread's current stream per device (StreamGuard). What every
// build may ask (device_count, is_available, synchronize, the TF32 switch) is in
// cuda/cuda.h, which this header includes.
//
// Streams memgrad creates do not synchronise with the legacy default stream (they are
// created non-blocking), so work on them overlaps work on the default stream; ordering
// between streams is stated with events (Event::record, Event::block). The current stream
// of a device starts as the legacy default stream (handle nullptr, StreamId 0), which is
// the stream the caching allocator's blocks belong to unless a StreamGuard says otherwise.
#pragma once

#include <cuda_runtime.h>

#include "memgrad/core/allocator/raw_backend.h"
#include "memgrad/core/device.h"
#include "memgrad/cuda/cuda.h"  // device_count, is_available, synchronize, TF32

namespace mg::cuda {

// Device indices memgrad tracks per-thread state for (the allocator registry's limit).
inline constexpr int kMaxDevices = 64;

// How many streaming multiprocessors `device` has (asked once per device): what kernels
// that size their grid to the GPU, rather than to the work, divide among.
int multiprocessor_count(Device device);

// Whether a kernel that follows another on `device`'s streams is launched early
// (cuda/kernels/dependent_launch.cuh): set_dependent_launch is on and the device has
// compute capability 9.0 or more (asked once per device).
bool launches_dependent(Device device);

// Makes `device` the calling thread's current CUDA device for a scope, then restores the
// one before.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_index_;
  int index_;
};

// How the device's scheduler ranks a stream's kernels against other streams' when both
// have work ready: a High stream's blocks are placed first as SMs free up (it does not
// preempt running blocks). Normal is the legacy default stream's, and the lowest.
enum class StreamPriority { Normal, High };

class Stream {
 public:
  // A new stream on `device`, owned, created non-blocking (no implicit synchronisation
  // with the legacy default stream), at `priority`.
  explicit Stream(Device device = Device::cuda(), StreamPriority priority = StreamPriority::Normal);
  // Not owned: the legacy default stream of `device`.
  static Stream default_stream(Device device = Device::cuda());
  // Not owned: the calling thread's current stream of `device` (see StreamGuard).
  static Stream current(Device device = Device::cuda());

  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t handle() const { return handle_; }
  // The caching allocator's name for this stream (0 for the legacy default stream).
  StreamId id() const { return reinterpret_cast<StreamId>(handle_); }
  Device device() const { return device_; }
  bool owned() const { return owned_; }
  // The stream's priority as the device ranks it (cudaStreamGetPriority).
  StreamPriority priority() const;

  // Blocks the calling thread until the work enqueued so far has finished.
  void synchronize() const;
  // Whether the work enqueued so far has finished. Does not block.
  bool query() const;

 private:
  Stream(Device device, cudaStream_t handle, bool owned)
      : device_(device), handle_(handle), owned_(owned) {}

  Device device_;
  cudaStream_t handle_ = nullptr;
  bool owned_ = false;
};

// A mark in a stream's work. Created at the first record(), on that stream's device, so an
// Event that was never recorded costs nothing and counts as complete.
class Event {
 public:
  // Timing costs a little at every record; elapsed_ms needs it on both events.
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the work enqueued on `stream` so far (re-recording moves the mark).
  void record(const Stream& stream);
  // Blocks the calling thread until the marked work has finished.
  void synchronize() const;
  // Whether the marked work has finished. Does not block.
  bool query() const;
  // Makes `stream` wait, on the device and without blocking the host, for the marked work
  // (cudaStreamWaitEvent): how one stream is ordered after another.
  void block(const Stream& stream) const;
  // Milliseconds between two recorded timing events, once `end` has completed.
  static float elapsed_ms(const Event& start, const Event& end);

  bool recorded() const { return event_ != nullptr; }
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
  Device device_ = Device::cuda();
  bool enable_timing_;
};

// The calling thread's current stream of `device`: where memgrad enqueues kernels and
// copies for it, and the stream its new blocks belong to. Default: the legacy default
// stream (nullptr).
cudaStream_t current_stream(Device device = Device::cuda());

// Makes `stream` the calling thread's current stream of its device for a scope, then
// restores the one before. The stream must outlive the guard. It does not change the
// current device (see DeviceGuard).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int index_;
  cudaStream_t previous_;
};

}  // namespace mg::cuda
