// cuda/runtime.cpp — devices, DeviceGuard, Stream, Event, the per-thread current stream,
// the TF32 switch and the dependent-launch switch.
//
// NOTE: destructors (Stream, Event, the guards) cannot throw, so they ignore the status of
// the CUDA call that releases or restores; at process exit the runtime may already be shut
// down (cudaErrorCudartUnloading), which is harmless there.
#include "memgrad/cuda/runtime.h"

#include <array>
#include <atomic>
#include <string>
#include <utility>

#include <cuda_profiler_api.h>

#include "memgrad/core/cuda_hooks.h"
#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/cuda/check.h"
#include "memgrad/cuda/device_error.h"

namespace mg::cuda {

namespace {

// The index of a CUDA device that exists; a clear error otherwise.
int checked_index(Device device) {
  MG_CHECK(device.is_cuda(), "expected a CUDA device, got ", device,
           ". Hint: streams, events and device guards exist only for cuda:N devices.");
  const int count = device_count();
  MG_CHECK(device.index >= 0 && device.index < count, "device ", device, " does not exist: ",
           count == 0 ? std::string("no CUDA device is visible (no GPU, no driver, or "
                                    "CUDA_VISIBLE_DEVICES hides them)")
                      : "this process sees " + std::to_string(count) + " CUDA device(s)",
           ". Hint: check nvidia-smi, or use the cpu device.");
  MG_ASSERT(device.index < kMaxDevices, "device index ", device.index, " beyond ", kMaxDevices);
  return device.index;
}

// `kAttribute` of `device`, asked of the runtime once per device and kept (one cache per
// attribute). NOTE: 0 marks "not asked yet", so only for attributes that are never 0;
// threads racing on the first call each ask and store the same value, which is harmless.
template <cudaDeviceAttr kAttribute>
int cached_device_attribute(Device device) {
  static std::array<std::atomic<int>, kMaxDevices> values{};
  const int index = checked_index(device);
  int value = values[index].load(std::memory_order_relaxed);
  if (value == 0) {
    MG_CUDA_CHECK(cudaDeviceGetAttribute(&value, kAttribute, index));
    values[index].store(value, std::memory_order_relaxed);
  }
  return value;
}

// The current device's stream priorities. CUDA ranks them downwards: the highest is the
// least number, and the lowest is the legacy default stream's.
struct PriorityRange {
  int lowest = 0;
  int highest = 0;
};

PriorityRange current_device_priorities() {
  PriorityRange range;
  MG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&range.lowest, &range.highest));
  return range;
}

// Each thread's current stream per device; nullptr is the legacy default stream.
thread_local std::array<cudaStream_t, kMaxDevices> current_streams{};

std::atomic<bool> allow_tf32_flag{false};
std::atomic<bool> dependent_launch_flag{false};

}  // namespace

int device_count() {
  static const int count = [] {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: not an error for the caller
      return 0;
    }
    return devices;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

int multiprocessor_count(Device device) { return cached_device_attribute<cudaDevAttrMultiProcessorCount>(device); }

void synchronize(Device device) {
  refuse_during_graph_capture("cuda::synchronize", "wait for the device after replay(), outside the captured step.");
  DeviceGuard guard(device);
  MG_CUDA_CHECK(cudaDeviceSynchronize());
  check_device_errors(device);  // what kernels found in their data (cuda/device_error.h)
}

// NOTE: the profiler API's status is ignored: without a profiler attached both calls are
// no-ops that report success, and a profiling aid must not fail a benchmark.
ProfilerRange::ProfilerRange() { static_cast<void>(cudaProfilerStart()); }

ProfilerRange::~ProfilerRange() { static_cast<void>(cudaProfilerStop()); }

// ---- DeviceGuard ----

DeviceGuard::DeviceGuard(Device device) : index_(checked_index(device)) {
  MG_CUDA_CHECK(cudaGetDevice(&previous_index_));
  if (previous_index_ != index_) MG_CUDA_CHECK(cudaSetDevice(index_));
}

DeviceGuard::~DeviceGuard() {
  if (previous_index_ != index_) (void)cudaSetDevice(previous_index_);
}

// ---- Stream ----

namespace {

// Destroys an owned stream once its work is done.
// NOTE: cudaStreamDestroy returns at once, and CUDA may hand the same handle to the next
// stream created. The caching allocator keys free blocks by the handle (StreamId), so a
// new stream with a reused handle would take blocks freed on the old one without any
// order to the old stream's pending work on them. Waiting here closes that gap. During a
// graph capture no wait is legal: the capture's own streams are not destroyed then, and a
// stream destroyed while another captures keeps the old behaviour.
void destroy_owned_stream(Device device, cudaStream_t handle) {
  if (handle == nullptr) return;
  // NOTE: no DeviceGuard, which throws: this runs in destructors. Errors are ignored, as
  // cudaStreamDestroy's always were here.
  int previous = -1;
  (void)cudaGetDevice(&previous);
  if (previous != device.index) (void)cudaSetDevice(device.index);
  if (!graph_capture_underway()) (void)cudaStreamSynchronize(handle);
  (void)cudaStreamDestroy(handle);
  if (previous != device.index && previous >= 0) (void)cudaSetDevice(previous);
}

}  // namespace

Stream::Stream(Device device, StreamPriority priority) : device_(device), owned_(true) {
  DeviceGuard guard(device);
  const PriorityRange range = current_device_priorities();
  MG_CUDA_CHECK(cudaStreamCreateWithPriority(&handle_, cudaStreamNonBlocking,
                                             priority == StreamPriority::High ? range.highest : range.lowest));
}

Stream Stream::default_stream(Device device) {
  checked_index(device);
  return Stream(device, nullptr, /*owned=*/false);
}

Stream Stream::current(Device device) {
  return Stream(device, current_stream(device), /*owned=*/false);
}

Stream::~Stream() {
  if (owned_) destroy_owned_stream(device_, handle_);
}

Stream::Stream(Stream&& other) noexcept
    : device_(other.device_),
      handle_(std::exchange(other.handle_, nullptr)),
      owned_(std::exchange(other.owned_, false)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (owned_) destroy_owned_stream(device_, handle_);
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

StreamPriority Stream::priority() const {
  DeviceGuard guard(device_);
  const PriorityRange range = current_device_priorities();
  int priority = range.lowest;
  MG_CUDA_CHECK(cudaStreamGetPriority(handle_, &priority));
  // Anything above the lowest (a stream another library made at a middle priority too).
  return priority < range.lowest ? StreamPriority::High : StreamPriority::Normal;
}

void Stream::synchronize() const {
  refuse_during_graph_capture("Stream::synchronize", "wait for the device after replay(), outside the captured step.");
  // The device matters for the legacy default stream (nullptr names the current device's).
  DeviceGuard guard(device_);
  MG_CUDA_CHECK(cudaStreamSynchronize(handle_));
  check_device_errors(device_);
}

bool Stream::query() const {
  refuse_during_graph_capture("Stream::query", "wait for the device after replay(), outside the captured step.");
  DeviceGuard guard(device_);
  const cudaError_t status = cudaStreamQuery(handle_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  MG_CUDA_CHECK(status);
  return true;
}

// ---- Event ----

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(other.device_),
      enable_timing_(other.enable_timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
    enable_timing_ = other.enable_timing_;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  // An event belongs to one device: the one current when it was created.
  DeviceGuard guard(stream.device());
  if (event_ == nullptr) {
    MG_CUDA_CHECK(cudaEventCreateWithFlags(
        &event_, enable_timing_ ? cudaEventDefault : cudaEventDisableTiming));
    device_ = stream.device();
  }
  MG_CHECK(device_ == stream.device(), "Event::record: the event belongs to ", device_,
           " but the stream to ", stream.device(), ". Hint: use one Event per device.");
  MG_CUDA_CHECK(cudaEventRecord(event_, stream.handle()));
}

void Event::synchronize() const {
  refuse_during_graph_capture("Event::synchronize", "wait for the device after replay(), outside the captured step.");
  if (event_ == nullptr) return;
  MG_CUDA_CHECK(cudaEventSynchronize(event_));
  check_device_errors(device_);
}

bool Event::query() const {
  refuse_during_graph_capture("Event::query", "wait for the device after replay(), outside the captured step.");
  if (event_ == nullptr) return true;
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  MG_CUDA_CHECK(status);
  return true;
}

void Event::block(const Stream& stream) const {
  if (event_ == nullptr) return;  // nothing marked, nothing to wait for
  DeviceGuard guard(stream.device());
  MG_CUDA_CHECK(cudaStreamWaitEvent(stream.handle(), event_, 0));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  MG_CHECK(start.enable_timing_ && end.enable_timing_, "Event::elapsed_ms needs two events "
           "made with enable_timing = true. Hint: Event start(true), end(true);");
  MG_CHECK(start.recorded() && end.recorded(), "Event::elapsed_ms: both events must have been "
           "recorded on a stream first.");
  float milliseconds = 0;
  MG_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start.event_, end.event_));
  return milliseconds;
}

// ---- the current stream ----

cudaStream_t current_stream(Device device) { return current_streams[checked_index(device)]; }

StreamId current_stream_id(Device device) {
  return reinterpret_cast<StreamId>(current_stream(device));
}

StreamGuard::StreamGuard(const Stream& stream)
    : index_(checked_index(stream.device())), previous_(current_streams[index_]) {
  current_streams[index_] = stream.handle();
}

StreamGuard::~StreamGuard() { current_streams[index_] = previous_; }

// ---- TF32 ----

void set_allow_tf32(bool allow) { allow_tf32_flag.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return allow_tf32_flag.load(std::memory_order_relaxed); }

// ---- dependent launch ----

void set_dependent_launch(bool allow) { dependent_launch_flag.store(allow, std::memory_order_relaxed); }
bool dependent_launch() { return dependent_launch_flag.load(std::memory_order_relaxed); }

bool launches_dependent(Device device) {
  return cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(device) >= 9 && dependent_launch();
}

}  // namespace mg::cuda
