// distributed/nccl_process_group.h — the NCCL backend: collectives on CUDA tensors between
// GPUs, one GPU per rank. Made by init_process_group({.backend = Backend::Nccl}) (or
// Backend::Auto with a CUDA device): distributed/init_process_group.h says how ranks start
// and how NCCL's unique id reaches them.
//
//   auto group = mg::distributed::init_process_group({.backend = mg::distributed::Backend::Nccl});
//   mg::Tensor gradient = ...;                                   // on group->device()
//   auto work = group->all_reduce(gradient, ReduceOp::Average);  // enqueued, returns at once
//   work->wait();   // the current stream waits for it on the device; the host goes on
//
// Every collective runs on the group's communication stream, after the work enqueued so
// far on the calling thread's current stream (an event, not a host wait), so it overlaps
// what the caller enqueues next; wait() orders the caller's stream after it
// (distributed/work.h). The caching allocator keeps the tensors' memory until the
// collective is done (record_stream). ReduceOp::Average is NCCL's own (ncclAvg). Dtypes:
// float32, float64, float16, bfloat16, int64, int32, uint8 for every collective; bool
// for broadcast and all_gather only. barrier() is an all_reduce of one float on the
// device: its wait() orders the stream; synchronize() waits on the host.
//
// A collective that does not complete within the group's timeout (or an error NCCL
// reports, e.g. a peer that died) aborts the communicator (cuda/nccl_communicator.h):
// the process prints why, and every later call on the group or its Works throws mg::Error.
// A group must be dropped before main() returns (its destructor talks to the GPU).
//
// Built when CUDA and NCCL are found (MG_WITH_NCCL); otherwise init_process_group says
// how to build with it (distributed/without_nccl.cpp).
#pragma once

namespace mg::distributed {

// The NCCL version memgrad runs with (e.g. 22809 for 2.28.9), or 0 in a build without NCCL.
int nccl_version();

}  // namespace mg::distributed
