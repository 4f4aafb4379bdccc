// tests/distributed/test_launch_environment.cpp — the launcher's variables (mpirun's and
// torchrun's) read into ranks, and every malformed or contradictory set refused with an
// error that names the variable.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "memgrad/core/error.h"
#include "memgrad/distributed/launch_environment.h"

using Catch::Matchers::Contains;
using mg::distributed::Launcher;
using mg::distributed::LaunchEnvironment;

namespace {

using Variables = std::map<std::string, std::string>;

LaunchEnvironment read(const Variables& variables) {
  return mg::distributed::read_launch_environment([&](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("No launcher's variables: a group of one", "[distributed]") {
  const LaunchEnvironment launch = read({});
  CHECK(launch.launcher == Launcher::None);
  CHECK(launch.rank == 0);
  CHECK(launch.world_size == 1);
  CHECK(launch.local_rank == 0);
  CHECK(launch.master_addr.empty());
  CHECK(launch.master_port == 0);
}

TEST_CASE("torchrun's variables give rank, world size, local rank and the master", "[distributed]") {
  const LaunchEnvironment launch = read({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                         {"MASTER_ADDR", "node0.cluster"}, {"MASTER_PORT", "29500"}});
  CHECK(launch.launcher == Launcher::Torchrun);
  CHECK(launch.rank == 5);
  CHECK(launch.world_size == 8);
  CHECK(launch.local_rank == 1);
  CHECK(launch.master_addr == "node0.cluster");
  CHECK(launch.master_port == 29500);
}

TEST_CASE("Without LOCAL_RANK the local rank is the rank", "[distributed]") {
  const LaunchEnvironment launch = read({{"RANK", "3"}, {"WORLD_SIZE", "4"}});
  CHECK(launch.local_rank == 3);
}

TEST_CASE("mpirun's variables give the ranks, and may agree with torchrun's", "[distributed]") {
  const Variables mpirun = {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}};
  LaunchEnvironment launch = read(mpirun);
  CHECK(launch.launcher == Launcher::Mpirun);
  CHECK(launch.rank == 2);
  CHECK(launch.world_size == 4);
  CHECK(launch.local_rank == 0);

  Variables both = mpirun;
  both.insert({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}});
  launch = read(both);
  CHECK(launch.launcher == Launcher::Mpirun);
  CHECK(launch.rank == 2);
}

TEST_CASE("mpirun's and torchrun's variables that disagree are refused", "[distributed]") {
  CHECK_THROWS_WITH(read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"RANK", "0"}, {"WORLD_SIZE", "4"}}),
                    Contains("the launch variables disagree: mpirun says rank 0 of 2") &&
                        Contains("WORLD_SIZE=4"));
}

TEST_CASE("Half of a launcher's pair is refused, naming the missing variable", "[distributed]") {
  CHECK_THROWS_WITH(read({{"RANK", "0"}}),
                    Contains("RANK is set but WORLD_SIZE is not") && Contains("Hint:"));
  CHECK_THROWS_WITH(read({{"WORLD_SIZE", "2"}}), Contains("WORLD_SIZE is set but RANK is not"));
  CHECK_THROWS_WITH(read({{"OMPI_COMM_WORLD_SIZE", "2"}}),
                    Contains("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"));
}

TEST_CASE("Values that are not integers in range are refused, naming the variable", "[distributed]") {
  CHECK_THROWS_WITH(read({{"RANK", "one"}, {"WORLD_SIZE", "2"}}),
                    Contains("RANK=\"one\" is not an integer"));
  CHECK_THROWS_WITH(read({{"RANK", "1x"}, {"WORLD_SIZE", "2"}}),
                    Contains("RANK=\"1x\" is not an integer"));
  CHECK_THROWS_WITH(read({{"RANK", ""}, {"WORLD_SIZE", "2"}}), Contains("RANK=\"\" is not an integer"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
                    Contains("WORLD_SIZE=0 is out of range"));
  CHECK_THROWS_WITH(read({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), Contains("RANK=-1 is out of range"));
  CHECK_THROWS_WITH(read({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                    Contains("RANK=2 is not a rank of a world of WORLD_SIZE=2"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}),
                    Contains("LOCAL_RANK=2 is out of range (0 .. 1)"));
  CHECK_THROWS_WITH(read({{"MASTER_PORT", "70000"}}), Contains("MASTER_PORT=70000 is out of range"));
  CHECK_THROWS_WITH(read({{"MASTER_PORT", "http"}}), Contains("MASTER_PORT=\"http\" is not an integer"));
}
