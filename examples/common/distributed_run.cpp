// examples/common/distributed_run.cpp — joining the job, per-rank seeds and shards, sums
// over ranks, rank 0's writes, and the optimizer's part of a checkpoint.
#include "examples/common/distributed_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include <memgrad/core/error.h>
#include <memgrad/core/factory.h>
#include <memgrad/distributed/distributed_sampler.h>
#include <memgrad/distributed/init_process_group.h>
#include <memgrad/distributed/launch_environment.h>
#include <memgrad/distributed/single_process_group.h>
#include "examples/common/cli.h"

namespace examples {
namespace {

namespace dist = mg::distributed;

// What peaks_by_rank gathers of each rank: peak allocated, peak reserved, then each
// category's peak.
constexpr int64_t kPeakFields = 2 + mg::kNumMemoryCategories;

// From here on, this process's standard output is thrown away (ranks other than 0).
void silence_stdout() {
  std::fflush(stdout);
  const int null_device = ::open("/dev/null", O_WRONLY);
  MG_CHECK(null_device >= 0, "cannot open /dev/null to silence the standard output of ranks other than 0.");
  ::dup2(null_device, STDOUT_FILENO);
  ::close(null_device);
}

}  // namespace

bool wants_distributed(bool flag) {
  try {
    return flag || dist::read_launch_environment().world_size > 1;
  } catch (const mg::Error& error) {
    throw UsageError(std::string("the launcher's environment variables do not fit together: ") + error.what());
  }
}

void refuse_distributed(bool distributed, bool given, const std::string& flag, const std::string& why) {
  if (distributed && given) {
    throw UsageError(flag + " does not go with --distributed (or a launch by mpirun or torchrun-style variables "
                     "with two ranks or more): " + why);
  }
}

std::string distributed_usage(bool with_zero) {
  std::string text = R"(  --distributed            data-parallel training (DistributedDataParallel): one process
                           per rank, each on its shard of the data, gradients averaged
                           over the ranks in backward. Automatic when mpirun or
                           torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK,
                           MASTER_ADDR, MASTER_PORT) start two ranks or more:
                             mpirun -np 2 PROGRAM --distributed ...   (CPU: MPI)
                             mpirun -np 2 PROGRAM --device cuda ...   (GPUs: NCCL, each
                                                                       rank on cuda:<local rank>)
                           --batch is per rank (the global batch is ranks x --batch);
                           only rank 0 prints and writes files; a checkpoint resumes on
                           any number of ranks (docs/distributed.md, "The examples")
)";
  if (with_zero) {
    text += R"(  --zero                   with --distributed: ZeRO-1, each rank keeps the optimizer
                           state of its 1/ranks of the parameters
                           (ZeroRedundancyOptimizer; checkpoints hold the whole state)
)";
  }
  return text;
}

void check_distributed_flags(const DistributedFlags& flags) {
  if (flags.zero && !flags.distributed) {
    throw UsageError("--zero shards the optimizer state over ranks: it needs --distributed");
  }
  refuse_distributed(flags.distributed, flags.cuda_graph, "--cuda-graph",
                     "the gradients' all-reduce is started from the host and cannot be captured");
  check_world_size(flags.distributed, flags.predicting, flags.world_size);
}

int parse_world_size(const std::string& text) {
  constexpr int64_t kMostRanks = int64_t{1} << 20;
  const int64_t ranks = parse_count("--world-size", text);
  if (ranks > kMostRanks) {
    throw UsageError("--world-size must be at most " + std::to_string(kMostRanks) + " ranks, got " + text);
  }
  return static_cast<int>(ranks);
}

void check_world_size(bool distributed, bool predicting, std::optional<int> world_size) {
  if (world_size && !(distributed && predicting)) {
    throw UsageError("--world-size is the number of ranks a memory prediction is for: it needs --distributed and "
                     "--predict-memory or --fit-batch (a training run takes its ranks from mpirun or torchrun-style "
                     "variables)");
  }
  if (!(distributed && predicting)) return;
  const int launched = dist::read_launch_environment().world_size;
  if (launched > 1) {
    throw UsageError("--predict-memory/--fit-batch run in one process, without ranks: run the command once, "
                     "without the launcher, with --distributed --world-size " + std::to_string(launched) +
                     " (this launch has " + std::to_string(launched) + " ranks)");
  }
}

std::string world_size_usage() {
  return R"(  --world-size N           with --distributed: predict rank 0 of a data-parallel run of N
                           ranks (default 1): the model in DistributedDataParallel, with
                           --zero ZeRO-1's optimizer shard, --batch per rank; every rank
                           holds the same bytes. No launcher: one process predicts it
)";
}

uint64_t mix_seed(uint64_t seed, uint64_t salt) {
  uint64_t mixed = seed + 0x9E3779B97F4A7C15ull * salt;
  mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9ull;
  mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBull;
  return mixed ^ (mixed >> 31);
}

DistributedRun DistributedRun::start(bool distributed, mg::Device device) {
  DistributedRun run(device);
  if (!distributed) return run;
  const dist::LaunchEnvironment launch = dist::read_launch_environment();
  if (launch.launcher == dist::Launcher::None) {
    // NOTE: no launcher: a world of one in this process (the DDP code path, no MPI needed).
    run.group_ = std::make_shared<dist::SingleProcessGroup>(device);
  } else {
    run.group_ = dist::init_process_group(
        {.backend = device.is_cuda() ? dist::Backend::Nccl : dist::Backend::Mpi, .device = std::nullopt});
    run.device_ = run.group_->device();
  }
  if (!run.is_main()) silence_stdout();
  return run;
}

std::string DistributedRun::describe() const {
  if (!active()) return "";
  return std::to_string(size()) + (size() == 1 ? " rank" : " ranks") + " over " + group_->backend_name();
}

std::shared_ptr<mg::nn::Module> DistributedRun::wrap(std::shared_ptr<mg::nn::Module> model) {
  if (!active()) return model;
  ddp_ = std::make_shared<dist::DistributedDataParallel>(std::move(model), group_);
  return ddp_;
}

uint64_t DistributedRun::rank_seed(uint64_t seed) const {
  return rank() == 0 ? seed : mix_seed(seed, 0x52414E4Bull + static_cast<uint64_t>(rank()));  // "RANK"
}

mg::data::DataLoaderOptions DistributedRun::training_shard(mg::data::DataLoaderOptions options,
                                                           int64_t dataset_size) const {
  if (!active()) return options;
  const dist::DistributedSampler sampler(
      dataset_size, {.num_replicas = size(), .rank = rank(), .shuffle = options.shuffle, .seed = options.seed});
  options.shuffle = false;
  options.sampler = [sampler](int64_t epoch) { return sampler.indices(epoch); };
  return options;
}

mg::data::DataLoaderOptions DistributedRun::evaluation_shard(mg::data::DataLoaderOptions options,
                                                             int64_t samples) const {
  options.shuffle = false;
  options.sampler = [samples, rank = rank(), ranks = size()](int64_t) {
    std::vector<int64_t> indices;
    for (int64_t index = rank; index < samples; index += ranks) indices.push_back(index);
    return indices;
  };
  return options;
}

int64_t DistributedRun::limited_samples(int64_t dataset_size, int64_t batch_size, int64_t limit) const {
  if (limit <= 0) return dataset_size;
  const int64_t global_batch = batch_size * size();
  return std::min(dataset_size, (limit + global_batch - 1) / global_batch * global_batch);
}

std::vector<double> DistributedRun::sum(std::vector<double> values) const {
  if (!active() || values.empty()) return values;
  const mg::Tensor summed =
      mg::from_vector(values, {static_cast<int64_t>(values.size())}).to(group_->device());
  group_->all_reduce(summed, dist::ReduceOp::Sum)->wait();
  return summed.to(mg::Device::cpu()).to_vector<double>();
}

void DistributedRun::on_main(const std::string& what, const std::function<void()>& write) const {
  std::exception_ptr error;
  if (is_main()) {
    try {
      write();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (active()) {
    const bool failed = sum({error ? 1.0 : 0.0}).front() > 0;
    MG_CHECK(!failed || is_main(), "rank 0 could not ", what, " (its error is on its standard error); rank ",
             rank(), " stops with it.");
  }
  if (error) std::rethrow_exception(error);
}

std::vector<mg::memory::Snapshot> DistributedRun::peaks_by_rank() const {
  const mg::memory::Snapshot own = mg::memory::snapshot(device_);
  if (!active()) return {own};
  std::vector<int64_t> fields = {own.peak_allocated_bytes, own.peak_reserved_bytes};
  for (const mg::memory::CategoryBytes& bytes : own.by_category) fields.push_back(bytes.peak);
  const mg::Tensor mine = mg::from_vector(fields, {kPeakFields}).to(group_->device());
  const mg::Tensor all = mg::empty({size() * kPeakFields}, {.dtype = mg::DType::Int64, .device = group_->device()});
  group_->all_gather(all, mine)->wait();
  const std::vector<int64_t> gathered = all.to(mg::Device::cpu()).to_vector<int64_t>();
  std::vector<mg::memory::Snapshot> peaks(size(), mg::memory::Snapshot{.device = device_});
  for (int r = 0; r < size(); ++r) {
    const int64_t* at = gathered.data() + r * kPeakFields;
    peaks[r].peak_allocated_bytes = at[0];
    peaks[r].peak_reserved_bytes = at[1];
    for (int c = 0; c < mg::kNumMemoryCategories; ++c) peaks[r].by_category[c].peak = at[2 + c];
  }
  return peaks;
}

std::optional<mg::optim::OptimizerStateDict> checkpoint_state(mg::optim::Optimizer& optimizer) {
  if (auto* zero = dynamic_cast<dist::ZeroRedundancyOptimizer*>(&optimizer)) return zero->consolidate_state_dict(0);
  return mg::optim::state_dict(optimizer);
}

void load_checkpoint_state(mg::optim::Optimizer& optimizer, const mg::optim::OptimizerStateDict& state,
                           const std::string& source) {
  if (auto* zero = dynamic_cast<dist::ZeroRedundancyOptimizer*>(&optimizer)) {
    zero->load_state_dict(state, source);
  } else {
    mg::optim::load_state_dict(optimizer, state, source);
  }
}

}  // namespace examples
