// distributed/launch_environment.cpp — the launcher's variables, parsed and checked.
#include "memgrad/distributed/launch_environment.h"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "memgrad/core/error.h"

namespace mg::distributed {

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::None: return "none";
    case Launcher::Mpirun: return "mpirun";
    case Launcher::Torchrun: return "torchrun-style variables";
  }
  MG_ASSERT(false, "unknown Launcher ", static_cast<int>(launcher));
}

namespace {

constexpr const char* kLaunchHint =
    " Hint: start the program with mpirun -np N, or with torchrun-style variables "
    "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT: docs/distributed.md), or with "
    "none of them for a group of one.";

class Variables {
 public:
  explicit Variables(const EnvironmentLookup& lookup) : lookup_(lookup) {}

  bool has(const char* name) const { return get(name) != nullptr; }

  // The variable as an integer in [low, high]; nullopt when it is not set.
  std::optional<int> integer(const char* name, int low, int high) const {
    const char* text = get(name);
    if (text == nullptr) return std::nullopt;
    const std::string_view value(text);
    long long parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    MG_CHECK(!value.empty() && error == std::errc() && end == value.data() + value.size(),
             "init_process_group: the environment variable ", name, "=\"", value,
             "\" is not an integer.", kLaunchHint);
    MG_CHECK(parsed >= low && parsed <= high, "init_process_group: the environment variable ",
             name, "=", parsed, " is out of range (", low, " .. ", high, ").", kLaunchHint);
    return static_cast<int>(parsed);
  }

  std::string text(const char* name) const {
    const char* value = get(name);
    return value == nullptr ? std::string() : std::string(value);
  }

 private:
  const char* get(const char* name) const {
    return lookup_ ? lookup_(name) : std::getenv(name);
  }
  const EnvironmentLookup& lookup_;
};

constexpr int kMaxRanks = 1 << 24;

struct Ranks {
  int rank;
  int world_size;
  std::optional<int> local_rank;
};

// One launcher's (rank, size, local rank) variables; nullopt when neither rank nor size is set.
std::optional<Ranks> read_ranks(const Variables& variables, const char* rank_name,
                                const char* size_name, const char* local_rank_name) {
  const std::optional<int> size = variables.integer(size_name, 1, kMaxRanks);
  const std::optional<int> rank = variables.integer(rank_name, 0, kMaxRanks - 1);
  if (!size && !rank) return std::nullopt;
  MG_CHECK(size && rank, "init_process_group: ", rank ? rank_name : size_name,
           " is set but ", rank ? size_name : rank_name, " is not; a launcher sets both.",
           kLaunchHint);
  MG_CHECK(*rank < *size, "init_process_group: ", rank_name, "=", *rank, " is not a rank of a "
           "world of ", size_name, "=", *size, " (ranks 0 .. ", *size - 1, ").", kLaunchHint);
  return Ranks{*rank, *size, variables.integer(local_rank_name, 0, *size - 1)};
}

}  // namespace

LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup) {
  const Variables variables(lookup);
  const std::optional<Ranks> mpirun = read_ranks(
      variables, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK");
  const std::optional<Ranks> torchrun = read_ranks(variables, "RANK", "WORLD_SIZE", "LOCAL_RANK");
  if (mpirun && torchrun) {
    MG_CHECK(mpirun->world_size == torchrun->world_size && mpirun->rank == torchrun->rank,
             "init_process_group: the launch variables disagree: mpirun says rank ", mpirun->rank,
             " of ", mpirun->world_size, " (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), but RANK=",
             torchrun->rank, " and WORLD_SIZE=", torchrun->world_size, ". Hint: under mpirun, "
             "leave RANK and WORLD_SIZE unset (or set them from mpirun's own ranks).");
  }

  LaunchEnvironment launch;
  const std::optional<Ranks>& ranks = mpirun ? mpirun : torchrun;
  if (ranks) {
    launch.launcher = mpirun ? Launcher::Mpirun : Launcher::Torchrun;
    launch.rank = ranks->rank;
    launch.world_size = ranks->world_size;
    const std::optional<int> local_rank =
        mpirun && mpirun->local_rank ? mpirun->local_rank : torchrun ? torchrun->local_rank
                                                                     : std::nullopt;
    launch.local_rank = local_rank.value_or(ranks->rank);
  }
  launch.master_addr = variables.text("MASTER_ADDR");
  launch.master_port = variables.integer("MASTER_PORT", 1, 65535).value_or(0);
  return launch;
}

}  // namespace mg::distributed
