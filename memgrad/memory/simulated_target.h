// memory/simulated_target.h — which real device the simulated device stands in for, so that a
// run there allocates as one on that device would: segments placed as that device's
// backend places them, and the scratch memory its kernels borrow.
//
// The simulated device's kernels do no arithmetic, but real kernels do more than write
// their results: the CPU convolution borrows im2col column buffers per thread, CUDA's batch
// norm borrows partial sums, cuDNN a workspace per call, cuBLAS one per stream for the
// life of the process. A ScratchModel is a kernel table that makes exactly those
// allocations (same sizes, categories and lifetimes, through the simulated device's own
// caching allocator) and nothing else, so a peak predicted on the simulated device is the
// peak of the target's run. Without a SimulatedTarget in force the simulated kernels
// borrow nothing (the allocator tests rely on that).
//
// NOTE: a prediction for a GPU needs neither a GPU nor a CUDA build. The CUDA model asks
// the same host arithmetic the CUDA kernels size their scratch with (cuda/plan/, built in
// every build); only the workspace cuDNN's heuristics choose per convolution needs a GPU,
// and is estimated without one. The model reaches the simulated kernels through
// core/simulated_kernels.h's set_simulated_scratch_kernels(), since core sits below memory/.
#pragma once

#include <string>

#include "memgrad/core/device.h"
#include "memgrad/core/simulated_kernels.h"

namespace mg {

struct ScratchModel {
  // No arithmetic; each entry allocates and frees what the target's kernel borrows.
  KernelTable kernels;
  // Forgets what the model kept across calls (cuBLAS's per-stream workspace, counts for
  // describe()), so the next prediction starts as a fresh process would. May be null.
  void (*reset)();
  // How exactly the model follows the target, for reports: e.g. whether cuDNN was asked.
  std::string (*describe)();
};

// The CPU kernels' scratch (memory/cpu_scratch_model.cpp): exact.
const ScratchModel& cpu_scratch_model();
// The CUDA kernels' scratch (memory/cuda_scratch_model.cpp): cuBLAS's workspace, batch norm's
// partial sums, cuDNN's workspace (exact where cuDNN can be asked, else an estimate).
const ScratchModel& cuda_scratch_model();

// While alive, `simulated` is a fresh simulated device of `capacity_bytes` that behaves as
// `target` (a CPU or CUDA device; throws mg::Error for a simulated one) would: its
// allocator places segments as the target's backend does (SegmentPlacement), and the
// simulated kernels borrow the scratch of the target's kernels. Any tensor on `simulated`
// must be gone first (checked). On destruction the model is reset (its kept scratch
// freed) and the simulated kernels borrow nothing again. One at a time.
class SimulatedTarget {
 public:
  SimulatedTarget(Device target, Device simulated, size_t capacity_bytes);
  ~SimulatedTarget();
  SimulatedTarget(const SimulatedTarget&) = delete;
  SimulatedTarget& operator=(const SimulatedTarget&) = delete;

  Device target() const { return target_; }
  // The model's own account of how exact it is.
  std::string describe() const;

 private:
  Device target_;
  const ScratchModel* model_;
};

// The model of the SimulatedTarget in force, or nullptr.
const ScratchModel* active_scratch_model();

// Whether work on `device` takes a GPU's paths: a CUDA device, or the simulated device while
// a SimulatedTarget stands in for one (so that a prediction for a GPU chooses as the GPU).
bool runs_as_cuda(Device device);

// Where a run on `simulated` keeps what a real run keeps in host memory (an offloaded
// optimizer's state and master weights, the host copies of its gradients), so that a
// prediction counts those bytes without allocating them: while a SimulatedTarget stands in
// for a CUDA device, simulated:63 (kSimulatedHostIndex), which the SimulatedTarget makes
// afresh with a 4 TiB capacity, placed as the host's malloc places segments; for a CPU
// target the host is the device itself, so `simulated`. Outside a SimulatedTarget,
// simulated:63 too.
inline constexpr int kSimulatedHostIndex = 63;
Device simulated_host_of(Device simulated);

}  // namespace mg
