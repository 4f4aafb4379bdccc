// tests/cuda/test_cuda_every_op.cpp — every op on CUDA in float32, float16, bfloat16 and
// float64 (and int32/int64 where the op takes integers) against the CPU in float64 (the
// loop and its cases: tests/ops/every_op.h; the same loop on the CPU:
// tests/ops/test_every_op.cpp).
#include "ops/every_op.h"

using namespace every_op;

TEST_CASE("every unary op of the list on CUDA, in every dtype and layout, matches the CPU", "[cuda][ops]") {
  int64_t cases = check_unary_ops(Device::cuda());
  WARN(cases << " unary cases");
  CHECK(cases > 0);
}

TEST_CASE("every binary op of the list on CUDA, both forms, broadcast and strided, matches the CPU",
          "[cuda][ops]") {
  int64_t cases = check_binary_ops(Device::cuda());
  WARN(cases << " binary cases");
  CHECK(cases > 0);
}

TEST_CASE("every reduction, norm, loss and layer op on CUDA, forward and backward, matches the CPU", "[cuda][ops]") {
  int64_t cases = check_op_cases(Device::cuda());
  WARN(cases << " op cases");
  CHECK(cases > 0);
}
