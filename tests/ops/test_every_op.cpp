// tests/ops/test_every_op.cpp — every op on the CPU in float32, float16, bfloat16 and
// float64 against the CPU in float64 (the loop and its cases: tests/ops/every_op.h; the
// same loop on CUDA: tests/cuda/test_cuda_every_op.cpp).
#include "ops/every_op.h"

using namespace every_op;

TEST_CASE("every unary op of the list on the CPU, in every dtype and layout, matches float64", "[ops]") {
  int64_t cases = check_unary_ops(Device::cpu());
  WARN(cases << " unary cases");
  CHECK(cases > 0);
}

TEST_CASE("every binary op of the list on the CPU, both forms, broadcast and strided, matches float64", "[ops]") {
  int64_t cases = check_binary_ops(Device::cpu());
  WARN(cases << " binary cases");
  CHECK(cases > 0);
}

TEST_CASE("every reduction, norm, loss and layer op on the CPU, forward and backward, matches float64", "[ops]") {
  int64_t cases = check_op_cases(Device::cpu());
  WARN(cases << " op cases");
  CHECK(cases > 0);
}
