// optim/scheduler_group_cursor.h — which parameter group LRScheduler::step() is asking a
// scheduler's lr_at about, for schedulers whose lr depends on the group itself (LambdaLR's
// per-group lambdas, ReduceLROnPlateau's per-group reductions) and not only on its base lr.
//
// NOTE: LRScheduler::lr_at(epoch, base_lr) names no group (optim/scheduler.h); step()
// asks once per group, in group order. Until lr_at takes the group's index (a base change
// proposed on 2026-12-07 with issue 37), the cursor counts those calls: group 0, 1, ...,
// then 0 again. A call that throws must reset() it, so that the step retried after the
// error starts at group 0 again.
#pragma once

#include <cstddef>

namespace mg::optim {

class SchedulerGroupCursor {
 public:
  explicit SchedulerGroupCursor(size_t groups) : groups_(groups) {}
  // The group of this lr_at call; the next call gets the next group.
  size_t next() {
    const size_t group = next_;
    next_ = (next_ + 1) % groups_;
    return group;
  }
  void reset() { next_ = 0; }

 private:
  size_t groups_;
  size_t next_ = 0;
};

}  // namespace mg::optim
