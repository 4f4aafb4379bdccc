// cuda/hold_stream.h — keeping a stream busy for a while, so that the host can enqueue
// work behind it: what makes a timing of short kernels measure the device, not the host.
//
// A timing that records an event, launches a kernel and records another measures from the
// first event to the kernel's end; when the stream was idle, that includes the host's time
// to issue the launch (for a cuDNN plan, building its variant pack too), which can exceed a
// short kernel's own. Held first, the stream reaches the first event only once the timed
// launches are all queued behind it.
#pragma once

#include "memgrad/cuda/runtime.h"

namespace mg::cuda {

// Enqueues on `stream` one kernel that spins for `microseconds` of the device's clock.
void hold_stream(const Stream& stream, int microseconds);

}  // namespace mg::cuda
