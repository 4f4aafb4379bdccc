// distributed/work.h — Work: the handle of one collective that a ProcessGroup has started.
//
//   auto work = group->all_reduce(gradient, ReduceOp::Average);  // returns at once
//   ...                                                          // compute meanwhile
//   work->wait();                                                // gradient now averaged
//
// The tensors a collective reads and writes must stay untouched until wait() returns (or
// is_completed() says true); the group holds them alive until then. Dropping a Work
// without waiting does not cancel its collective: the group completes it, and reports
// its error (a timeout), at its next collective or wait.
#pragma once

namespace mg::distributed {

class Work {
 public:
  virtual ~Work() = default;

  // True once the collective is done on this rank (its results in place); never blocks.
  // Past the timeout it throws as wait() does.
  virtual bool is_completed() = 0;
  // Blocks until the collective is done on this rank. Throws mg::Error when it does not
  // complete within the group's timeout (another rank died, is stuck, or called a
  // different collective); the group is unusable after that.
  virtual void wait() = 0;
};

}  // namespace mg::distributed
