// tests/examples/test_deterministic_cli.cpp — --deterministic in the examples
// (examples/common/deterministic.h). On the CPU every kernel is deterministic already, so a
// run with it ends byte-equal to a run without; on a GPU it is what makes two runs equal
// (tests/cuda/test_cuda_determinism.cpp tests the kernels it switches).
#include <catch2/catch.hpp>
#include <string>

#include "examples/output_checks.h"
#include "examples/program_runner.h"

using mg_test::TempDir;

TEST_CASE("gpt --deterministic on the CPU trains to the same weights and state as without it", "[examples][gpt][determinism]") {
  TempDir dir("gpt-deterministic");
  const std::string common = "--data " MG_SOURCE_DIR "/tests/examples/data/harbour_town.txt "
                             "--preset tiny --steps 4 --batch 4 --eval-interval 2 --eval-iters 1 --threads 1 --save ";
  mg_test::run_ok(dir, "gpt", common + dir.file("plain.safetensors"));
  mg_test::run_ok(dir, "gpt", common + dir.file("deterministic.safetensors") + " --deterministic");
  mg_test::check_same_checkpoint(dir.file("plain.safetensors"), dir.file("deterministic.safetensors"));
}
