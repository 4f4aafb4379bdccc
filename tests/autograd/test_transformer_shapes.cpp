// tests/autograd/test_transformer_shapes.cpp — the shape ops a transformer needs:
// masked_fill, tril/triu, split/chunk, and checks of the existing views, cat, batched
// matmul, arange and argmax as attention uses them. Values against hand-computed numbers,
// gradcheck in float64, and one test per error.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/elementwise.h"
#include "autograd/gradcheck.h"
#include "autograd/matmul.h"
#include "autograd/reduce.h"
#include "autograd/shape.h"
#include "autograd/tensor_checks.h"
#include "core/allocator/registry.h"
#include "core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;

namespace {

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

// 0, 1, 2, ... as float64, viewed as `sizes`.
Tensor counting(const Shape& sizes) {
  return arange(static_cast<double>(sizes.numel()), {.dtype = DType::Float64}).view(sizes);
}

Tensor bool_tensor(const std::vector<bool>& values, const Shape& sizes) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return from_vector<uint8_t>(bytes, sizes).to(DType::Bool);
}

void check_gradients(const Function& fn, const std::vector<Tensor>& inputs) {
  GradcheckResult result = gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

std::vector<double> values(const Tensor& x) { return x.to(DType::Float64).to_vector<double>(); }

int64_t allocated_bytes() { return allocator_for(Device::cpu()).stats().allocated_bytes.current; }

}  // namespace

// ---- masked_fill ----

TEST_CASE("masked_fill writes the value where the broadcast mask is true", "[masked_fill]") {
  Tensor x = counting({2, 3});
  Tensor column_mask = bool_tensor({true, false, true}, {3});  // broadcast over rows
  CHECK(values(masked_fill(x, column_mask, -1.0)) == std::vector<double>{-1, 1, -1, -1, 4, -1});
  Tensor row_mask = bool_tensor({false, true}, {2, 1});  // broadcast over columns
  CHECK(values(masked_fill(x, row_mask, 7.0)) == std::vector<double>{0, 1, 2, 7, 7, 7});

  // -inf survives every floating dtype; the output is contiguous even for a strided input.
  double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    Tensor transposed = counting({3, 2}).to(dtype).t();  // (2, 3), not contiguous
    Tensor output = masked_fill(transposed, column_mask, -inf);
    CHECK(output.is_contiguous());
    CHECK(output.dtype() == dtype);
    CHECK(values(output) == std::vector<double>{-inf, 2, -inf, -inf, 3, -inf});
  }
  // Integer tensors too.
  Tensor integers = from_vector<int64_t>({1, 2, 3}, {3});
  CHECK(integers.dtype() == DType::Int64);
  CHECK(values(masked_fill(integers, column_mask, 0.0)) == std::vector<double>{0, 2, 0});
}

TEST_CASE("masked_fill's gradient is zero where filled and saves only the mask", "[masked_fill]") {
  Tensor mask = bool_tensor({true, false, false, true, true, false}, {2, 1, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return masked_fill(in[0], mask, -5.0); },
                  {leaf({2, 4, 3}, 1)});
  Tensor causal = bool_tensor({false, true, false, false}, {2, 2});
  check_gradients([&](const std::vector<Tensor>& in) { return masked_fill(mul(in[0], in[0]), causal, 0.5); },
                  {leaf({3, 2, 2}, 2)});

  Tensor x = leaf({2, 3}, 3);
  Tensor row_mask = bool_tensor({true, false, true}, {3});
  Tensor output = masked_fill(x, row_mask, 1.0);
  sum(mul(output, 3.0)).backward();
  CHECK(values(x.grad()) == std::vector<double>{0, 3, 0, 0, 3, 0});
}

TEST_CASE("masked_fill rejects a mask that is not bool, not broadcastable, or elsewhere", "[masked_fill]") {
  Tensor x = counting({2, 3});
  std::string not_bool = error_message([&] { masked_fill(x, zeros({3}), 0.0); });
  CHECK(contains(not_bool, "must be bool"));
  CHECK(contains(not_bool, "float32"));
  std::string wrong_shape = error_message([&] { masked_fill(x, bool_tensor({true, false}, {2}), 0.0); });
  CHECK(contains(wrong_shape, "does not broadcast"));
  CHECK(contains(wrong_shape, "[2]"));
  CHECK(contains(wrong_shape, "[2, 3]"));
  std::string too_many_dims =
      error_message([&] { masked_fill(x, bool_tensor({true, false, true}, {1, 1, 3}), 0.0); });
  CHECK(contains(too_many_dims, "does not broadcast"));
}
