// distributed/mpi_process_group.cpp — the MPI backend: collectives on CPU tensors carried
// by MPI's non-blocking collectives (MPI_Iallreduce, MPI_Ibcast, MPI_Ireduce_scatter_block,
// MPI_Iallgather, MPI_Ibarrier), and make_mpi_process_group(), which init_process_group()
// (init_process_group.cpp) calls to build it.
//
// Each collective starts at once and is finished by polling (MPI_Test) against a deadline:
// that is what lets a collective some rank never joins end with an mg::Error after the
// group's timeout, where a blocking MPI call would wait forever.
//
// NOTE: Open MPI advances a non-blocking collective only inside MPI calls, so a collective
// makes progress while memgrad polls: in wait(), is_completed(), and whenever the group
// starts another collective. Work done between start and wait overlaps the transfer of
// the first, eager part of the data; the rest moves once wait() polls.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/distributed/mpi_runtime.h"
#include "memgrad/distributed/process_group_backends.h"

namespace mg::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Every MPI call is checked: the group's communicator returns errors instead of aborting.
void check_mpi(int status, const char* call, const char* file, int line) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  mg::detail::throw_error(mg::detail::str_cat(call, " failed at ", file, ":", line, ": ",
                                      std::string(text, length)));
}
#define MG_MPI_CHECK(call) check_mpi((call), #call, __FILE__, __LINE__)

// The MPI type that carries `dtype`'s elements unchanged (for broadcast and all_gather).
MPI_Datatype carrier_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
    // MPI has no 16-bit float type; moving the bits needs none.
    case DType::Float16:
    case DType::BFloat16: return MPI_UINT16_T;
  }
  MG_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

// The MPI type that MPI_SUM can add for `tensor`'s dtype; refuses the others.
MPI_Datatype summable_type(const Tensor& tensor, const char* collective) {
  const DType dtype = tensor.dtype();
  MG_CHECK(!is_16_bit_float(dtype) && dtype != DType::Bool, collective,
           ": the MPI backend cannot reduce ", describe_tensor(tensor), " (MPI has no ",
           dtype_name(dtype), " arithmetic). Hint: reduce a float32 copy (t.to(mg::DType::Float32)) "
           "and convert back.");
  return carrier_type(dtype);
}

int element_count(const Tensor& tensor, const char* collective) {
  MG_CHECK(tensor.numel() <= INT_MAX, collective, ": the MPI backend carries at most ", INT_MAX,
           " elements per collective (MPI counts are int), got ", describe_tensor(tensor),
           ". Hint: split the tensor into chunks.");
  return static_cast<int>(tensor.numel());
}

void check_cpu(const Tensor& tensor, const char* collective) {
  MG_CHECK(!tensor.device().is_cuda(), collective, ": the MPI backend carries CPU tensors; use the "
           "NCCL backend for CUDA tensors (got ", describe_tensor(tensor), ").");
  MG_CHECK(tensor.device().is_cpu(), collective, ": the MPI backend carries CPU tensors, got ",
           describe_tensor(tensor), ". Hint: .to(mg::Device::cpu()) first.");
}

// The element-wise average from the sum: ReduceOp::Average is a sum that is then divided,
// once the collective is done.
void divide_by(const Tensor& tensor, int divisor) {
  if (tensor.dtype() == DType::Float32) {
    float* values = tensor.data_ptr<float>();
    for (int64_t i = 0; i < tensor.numel(); ++i) values[i] /= static_cast<float>(divisor);
  } else {
    MG_ASSERT(tensor.dtype() == DType::Float64, "average of ", tensor.dtype());
    double* values = tensor.data_ptr<double>();
    for (int64_t i = 0; i < tensor.numel(); ++i) values[i] /= divisor;
  }
}

// One collective in flight.
struct Collective {
  std::string description;  // "all_reduce (sum) of a float32 tensor of shape [4] on cpu"
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<Tensor> tensors;   // held alive until done: MPI reads and writes their bytes
  std::function<void()> finish;  // run once done (e.g. the average's division); may be empty
  std::chrono::milliseconds timeout{};
  Clock::time_point deadline;  // its start + timeout
  bool done = false;
};

// What a group and its Work handles share (a Work may outlive its group): the
// communicator and the collectives in flight on it. Every MPI call is made with
// mpi::mutex() held.
class Communicator {
 public:
  Communicator(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  // Finishes the collectives whose Work was dropped; frees the communicator unless a
  // collective was lost on it (then the process is ending: mpi_runtime.h).
  ~Communicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // a group that outlived MPI (a static made before the first group)
    if (!lost_.empty()) return;
    try {
      std::vector<std::shared_ptr<Collective>> in_flight = in_flight_;
      for (const auto& collective : in_flight) wait(collective);
    } catch (const Error& error) {
      std::fprintf(stderr, "memgrad: a process group ended with a collective in flight: %s\n",
                   error.what());
    }
    if (lost_.empty()) MPI_Comm_free(&comm_);
  }

  MPI_Comm comm() const { return comm_; }

  // Starts a collective: `start` makes the MPI call that fills the request.
  std::shared_ptr<Collective> start(std::string description, std::vector<Tensor> tensors,
                                    std::function<void()> finish, std::chrono::milliseconds timeout,
                                    const std::function<int(MPI_Request*)>& start_call) {
    auto collective = std::make_shared<Collective>();
    collective->description = std::move(description);
    collective->tensors = std::move(tensors);
    collective->finish = std::move(finish);
    std::lock_guard<std::mutex> lock(mpi::mutex());
    progress();  // reports a collective lost earlier, before anything new is started
    collective->timeout = timeout;
    collective->deadline = Clock::now() + timeout;
    MG_MPI_CHECK(start_call(&collective->request));
    in_flight_.push_back(collective);
    return collective;
  }

  bool test(const std::shared_ptr<Collective>& collective) {
    std::lock_guard<std::mutex> lock(mpi::mutex());
    progress();
    return collective->done;
  }

  void wait(const std::shared_ptr<Collective>& collective) {
    // NOTE: yield first (a small collective completes within microseconds), then sleep a
    // little longer each time up to 1 ms: ranks may share cores (mpirun --oversubscribe),
    // and a rank that spins takes the core from the rank it is waiting for.
    auto pause = std::chrono::microseconds(1);
    for (int polls = 0; !test(collective); ++polls) {
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
      }
    }
  }

 private:
  // Tests every collective in flight; finishes those done; throws when one is past its
  // deadline (and from then on, on every call).
  void progress() {
    MG_CHECK(lost_.empty(), lost_, " This process group can no longer be used.");
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      Collective& collective = **it;
      int completed = 0;
      MG_MPI_CHECK(MPI_Test(&collective.request, &completed, MPI_STATUS_IGNORE));
      if (completed) {
        if (collective.finish) collective.finish();
        collective.tensors.clear();
        collective.done = true;
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
    const Clock::time_point now = Clock::now();
    for (const auto& collective : in_flight_) {
      if (now < collective->deadline) continue;
      // NOTE: the request stays pending (MPI cannot cancel a collective), so its tensors
      // stay held: MPI may still write into them.
      lost_ = mg::detail::str_cat(
          collective->description, " on rank ", rank_, " of ", size_, " did not complete within ",
          collective->timeout.count() / 1000.0, " s: another rank has not joined it (it died, "
          "is stuck, or called a different collective). Hint: every rank must call the same "
          "collectives in the same order; a rank that is slow for good reason needs a longer "
          "timeout (ProcessGroupOptions::timeout, ProcessGroup::set_timeout).");
      mpi::note_lost_collective(lost_);
      mg::detail::throw_error(lost_);
    }
  }

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<std::shared_ptr<Collective>> in_flight_;
  std::string lost_;  // the lost collective's error message, once one was lost
};

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<Communicator> communicator, std::shared_ptr<Collective> collective)
      : communicator_(std::move(communicator)), collective_(std::move(collective)) {}

  bool is_completed() override { return communicator_->test(collective_); }
  void wait() override { communicator_->wait(collective_); }

 private:
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<Collective> collective_;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(std::shared_ptr<Communicator> communicator, int rank, int size, int local_rank,
                  std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size, local_rank, timeout), communicator_(std::move(communicator)) {}

  const char* backend_name() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

 protected:
  std::shared_ptr<Work> start_all_reduce(const Tensor& tensor, ReduceOp op) override {
    check_cpu(tensor, "all_reduce");
    const MPI_Datatype type = summable_type(tensor, "all_reduce");
    const int count = element_count(tensor, "all_reduce");
    void* data = tensor.raw_data();
    MPI_Comm comm = communicator_->comm();
    return launch(mg::detail::str_cat("all_reduce (", reduce_op_name(op), ") of ",
                                  describe_tensor(tensor)),
                  {tensor}, average_of(tensor, op), [=](MPI_Request* request) {
                    return MPI_Iallreduce(MPI_IN_PLACE, data, count, type, MPI_SUM, comm, request);
                  });
  }

  std::shared_ptr<Work> start_broadcast(const Tensor& tensor, int root) override {
    check_cpu(tensor, "broadcast");
    const MPI_Datatype type = carrier_type(tensor.dtype());
    const int count = element_count(tensor, "broadcast");
    void* data = tensor.raw_data();
    MPI_Comm comm = communicator_->comm();
    return launch(mg::detail::str_cat("broadcast from rank ", root, " of ", describe_tensor(tensor)),
                  {tensor}, {}, [=](MPI_Request* request) {
                    return MPI_Ibcast(data, count, type, root, comm, request);
                  });
  }

  std::shared_ptr<Work> start_reduce_scatter(const Tensor& output, const Tensor& input,
                                             ReduceOp op) override {
    check_cpu(input, "reduce_scatter");
    const MPI_Datatype type = summable_type(input, "reduce_scatter");
    element_count(input, "reduce_scatter");
    const int count = element_count(output, "reduce_scatter");
    const void* send = input.raw_data();
    void* receive = output.raw_data();
    MPI_Comm comm = communicator_->comm();
    return launch(mg::detail::str_cat("reduce_scatter (", reduce_op_name(op), ") of ",
                                  describe_tensor(input), " into ", describe_tensor(output)),
                  {output, input}, average_of(output, op), [=](MPI_Request* request) {
                    return MPI_Ireduce_scatter_block(send, receive, count, type, MPI_SUM, comm,
                                                     request);
                  });
  }

  std::shared_ptr<Work> start_all_gather(const Tensor& output, const Tensor& input) override {
    check_cpu(input, "all_gather");
    const MPI_Datatype type = carrier_type(input.dtype());
    element_count(output, "all_gather");
    const int count = element_count(input, "all_gather");
    const void* send = input.raw_data();
    void* receive = output.raw_data();
    MPI_Comm comm = communicator_->comm();
    return launch(mg::detail::str_cat("all_gather of ", describe_tensor(input), " into ",
                                  describe_tensor(output)),
                  {output, input}, {}, [=](MPI_Request* request) {
                    return MPI_Iallgather(send, count, type, receive, count, type, comm, request);
                  });
  }

  std::shared_ptr<Work> start_barrier() override {
    MPI_Comm comm = communicator_->comm();
    return launch("barrier", {}, {},
                  [=](MPI_Request* request) { return MPI_Ibarrier(comm, request); });
  }

 private:
  std::function<void()> average_of(const Tensor& result, ReduceOp op) const {
    if (op != ReduceOp::Average) return {};
    return [result, size = size()] { divide_by(result, size); };
  }

  std::shared_ptr<Work> launch(std::string description, std::vector<Tensor> tensors,
                               std::function<void()> finish,
                               const std::function<int(MPI_Request*)>& start_call) {
    auto collective = communicator_->start(std::move(description), std::move(tensors),
                                           std::move(finish), timeout(), start_call);
    return std::make_shared<MpiWork>(communicator_, std::move(collective));
  }

  std::shared_ptr<Communicator> communicator_;
};

// The rank among the processes on this machine: Open MPI's mpirun says it; otherwise the
// ranks that share memory with this one are asked (a collective over `comm`).
int local_rank_of(MPI_Comm comm, int rank) {
  if (const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    return std::atoi(local_rank);
  }
  MPI_Comm node;
  MG_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_rank = 0;
  MG_MPI_CHECK(MPI_Comm_rank(node, &node_rank));
  MG_MPI_CHECK(MPI_Comm_free(&node));
  return node_rank;
}

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(std::chrono::milliseconds timeout) {
  mpi::ensure_initialized();
  std::lock_guard<std::mutex> lock(mpi::mutex());
  // A communicator of its own: memgrad's collectives never match the program's own MPI
  // calls, nor another group's.
  MPI_Comm comm;
  MG_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MG_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0;
  int size = 0;
  MG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MG_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int local_rank = local_rank_of(comm, rank);
  return std::make_shared<MpiProcessGroup>(std::make_shared<Communicator>(comm, rank, size), rank,
                                           size, local_rank, timeout);
}

}  // namespace mg::distributed
