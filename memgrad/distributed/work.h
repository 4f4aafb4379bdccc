// distributed/work.h — Work: the handle of one collective that a ProcessGroup has started.
//
//   auto work = group->all_reduce(gradient, ReduceOp::Average);  // returns at once
//   ...                                                          // compute meanwhile
//   work->wait();                                                // gradient now averaged
//
// wait() makes the results usable by what the calling thread does next, without waiting
// longer than that needs:
//   MPI (CPU tensors)   the host blocks until the collective is done.
//   NCCL (CUDA tensors) the host does not block: the calling thread's current stream of the
//                       group's device waits, on the device, for the collective (as
//                       PyTorch's NCCL Work.wait()). Kernels enqueued on that stream after
//                       wait() see the results; the host sees them once it synchronises
//                       with that stream (e.g. .to(Device::cpu()) or item()).
// synchronize() blocks the host until the collective is done, on every backend.
//
// The tensors a collective reads and writes must not be written (nor, for its outputs,
// read) until wait() returns: on CUDA, by work enqueued on any stream before wait(). The
// group keeps their memory from being reused until the collective is done, even if the
// tensors die first. Dropping a Work without waiting does not cancel its collective: the
// group completes it, and reports its error (a timeout), at its next collective or wait.
#pragma once

namespace mg::distributed {

class Work {
 public:
  virtual ~Work() = default;

  // True once the collective is done on this rank (its results in place); never blocks.
  // Past the timeout it throws as wait() does.
  virtual bool is_completed() = 0;
  // Orders what the caller does next after the collective (see above). Throws mg::Error
  // when the collective did not complete within the group's timeout (another rank died,
  // is stuck, or called a different collective); the group is unusable after that. On
  // NCCL, a timeout found later than wait() is thrown by the next call on the group or
  // any of its Works.
  virtual void wait() = 0;
  // Blocks the host until the collective is done on this rank; throws as wait() does.
  // (The default serves backends whose wait() already blocks the host.)
  virtual void synchronize() { wait(); }
};

}  // namespace mg::distributed
