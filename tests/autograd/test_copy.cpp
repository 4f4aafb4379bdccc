// tests/autograd/test_copy.cpp — clone, detach, contiguous, to(dtype), to(device), to_each:
// what each allocates (exact bytes from the allocator's statistics), values, and gradients.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/shape.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

MemoryStats stats(Device device = Device::cpu()) { return allocator_for(device).stats(); }

void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                     const std::vector<Tensor>& inputs) {
  GradcheckResult result = gradcheck(fn, inputs);
  INFO(result.message);
  CHECK(result.passed);
}

}  // namespace

TEST_CASE("detach shares the bytes, allocates nothing and has no history", "[copy]") {
  Tensor x = leaf({3, 7}, 1);
  Tensor y = x * 2.0;
  int64_t before = stats().allocated_bytes.current;
  Tensor detached = y.detach();
  CHECK(stats().allocated_bytes.current == before);
  CHECK(detached.storage() == y.storage());
  CHECK_FALSE(detached.grad_fn());
  CHECK_FALSE(detached.requires_grad());
  CHECK(detached.is_leaf());
  CHECK(y.grad_fn());  // the original keeps its history
  detached.data_ptr<double>()[0] = 42.0;
  CHECK(y.to_vector<double>()[0] == 42.0);
}

TEST_CASE("clone allocates exactly one tensor's bytes and lets the gradient through", "[copy]") {
  Tensor x = leaf({3, 7}, 2);  // 21 float64 = 168 bytes, one 512-byte block
  MemoryStats before = stats();
  Tensor cloned = x.clone();
  MemoryStats after = stats();
  CHECK(after.allocated_bytes.current - before.allocated_bytes.current == 512);
  CHECK(after.requested_bytes.current - before.requested_bytes.current == 168);
  CHECK(cloned.storage() != x.storage());
  CHECK(cloned.to_vector<double>() == x.to_vector<double>());
  REQUIRE(cloned.grad_fn());
  CHECK(std::string(cloned.grad_fn()->name()) == "CloneBackward");
  CHECK(cloned.requires_grad());

  Tensor wide = zeros({10, 100});  // 4000 float32 bytes: rounded to 4096
  int64_t wide_before = stats().allocated_bytes.current;
  Tensor wide_clone = wide.clone();
  CHECK(stats().allocated_bytes.current - wide_before == 4096);
  CHECK_FALSE(wide_clone.grad_fn());  // nothing required grad: no node
}

TEST_CASE("clone of a non-contiguous tensor is contiguous, in row-major order", "[copy]") {
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor cloned = x.t().clone();
  CHECK(cloned.is_contiguous());
  CHECK(cloned.sizes() == Shape{3, 2});
  CHECK(cloned.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("contiguous returns the tensor itself when it already is", "[copy]") {
  Tensor x = leaf({4, 5}, 3);
  int64_t before = stats().allocated_bytes.current;
  CHECK(x.contiguous().is_same(x));
  CHECK(stats().allocated_bytes.current == before);
  Tensor made = x.t().contiguous();
  CHECK(made.is_contiguous());
  CHECK(stats().allocated_bytes.current - before == 512);  // 160 bytes
  CHECK(made.to_vector<double>() == contiguous_copy(x.t()).to_vector<double>());
}

TEST_CASE("gradcheck: clone and contiguous", "[copy]") {
  Tensor x = leaf({3, 4}, 4);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].clone(); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t().clone() * in[0].t(); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return in[0].t().contiguous().view({12}); }, {x});
}

TEST_CASE("to(dtype) converts and the gradient comes back in the input's dtype", "[copy]") {
  Tensor x = from_vector<double>({1.5, -2.0, 0.25});
  x.requires_grad_();
  CHECK(x.to(DType::Float64).is_same(x));

  Tensor single = x.to(DType::Float32);
  CHECK(single.dtype() == DType::Float32);
  CHECK(single.to_vector<float>() == std::vector<float>{1.5f, -2.0f, 0.25f});
  REQUIRE(single.grad_fn());
  sum(single * single).backward();  // d/dx x^2 = 2x
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::Float64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, -4.0, 0.5});

  // Integer values are not differentiable: no graph.
  Tensor integers = x.to(DType::Int64);
  CHECK(integers.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 0});
  CHECK_FALSE(integers.requires_grad());
  CHECK_FALSE(integers.grad_fn());
}

TEST_CASE("to(dtype) keeps a channels_last tensor channels_last, and its gradient too", "[copy][memory_format]") {
  Tensor x = leaf({2, 3, 4, 5}, 11).detach().contiguous(MemoryFormat::ChannelsLast);
  x.requires_grad_();
  Tensor single = x.to(DType::Float32);
  CHECK(single.strides() == x.strides());  // NHWC, as PyTorch's .to(dtype) keeps it
  CHECK(single.to_vector<float>() == x.to(DType::Float32).contiguous().to_vector<float>());
  // The gradient flows back in the layout it arrives in: here, channels_last.
  (single * 2.0f).backward(ones({2, 3, 4, 5}, {.dtype = DType::Float32}).contiguous(MemoryFormat::ChannelsLast));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::Float64);
  CHECK(suggest_memory_format(x.grad()) == MemoryFormat::ChannelsLast);
  CHECK(x.grad().contiguous().to_vector<double>() == std::vector<double>(120, 2.0));
  // Row-major stays row-major.
  CHECK(leaf({2, 3, 4, 5}, 12).to(DType::Float32).is_contiguous());
}

TEST_CASE("to(device) moves the bytes and the gradient back", "[copy]") {
  Device simulated = Device::simulated(5);
  Tensor x = leaf({2, 3}, 5);
  CHECK(x.to(Device::cpu()).is_same(x));

  int64_t requested_before = stats(simulated).requested_bytes.current;
  Tensor moved = x.to(simulated, /*non_blocking=*/true);
  CHECK(moved.device() == simulated);
  CHECK(stats(simulated).requested_bytes.current - requested_before == 48);
  REQUIRE(moved.grad_fn());
  CHECK(std::string(moved.grad_fn()->name()) == "ToCopyBackward");

  // The simulated device holds no values; the gradient's shape, dtype and device can
  // still be checked.
  moved.backward(ones({2, 3}, {.dtype = DType::Float64, .device = simulated}));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == Device::cpu());
  CHECK(x.grad().dtype() == DType::Float64);
  CHECK(x.grad().sizes() == Shape{2, 3});
}

TEST_CASE("contiguous(ChannelsLast) keeps sizes, stores NHWC, and is differentiable", "[copy][memory_format]") {
  Tensor x = leaf({2, 3, 4, 5}, 7);
  CHECK(suggest_memory_format(x) == MemoryFormat::Contiguous);
  Tensor nhwc = x.contiguous(MemoryFormat::ChannelsLast);
  CHECK(nhwc.sizes() == x.sizes());
  CHECK(nhwc.strides() == Shape{60, 1, 15, 3});
  CHECK(is_contiguous_in(nhwc, MemoryFormat::ChannelsLast));
  CHECK_FALSE(nhwc.is_contiguous());
  CHECK(suggest_memory_format(nhwc) == MemoryFormat::ChannelsLast);
  CHECK(nhwc.contiguous(MemoryFormat::ChannelsLast).storage() == nhwc.storage());  // no copy
  // Same values at every logical index: the NCHW copy of the NHWC copy equals x.
  CHECK(nhwc.contiguous().to_vector<double>() == x.to_vector<double>());
  // The memory layout really is NHWC: element (n=0, c=1, h=0, w=0) sits at offset 1.
  Tensor raw = make_view(nhwc, {nhwc.numel()}, {1}, 0);
  CHECK(raw.to_vector<double>()[1] == x.to_vector<double>()[20]);
  check_gradients([](const std::vector<Tensor>& in) { return in[0].contiguous(MemoryFormat::ChannelsLast) * 3.0; },
                  {x});
}

TEST_CASE("channels_last: a 1x1 image is both layouts and non-4-D tensors are refused", "[copy][memory_format]") {
  Tensor pixel = leaf({2, 3, 1, 1}, 8);
  CHECK(is_contiguous_in(pixel, MemoryFormat::ChannelsLast));
  CHECK(suggest_memory_format(pixel) == MemoryFormat::Contiguous);
  CHECK_THROWS_WITH(strides_for({3, 4}, MemoryFormat::ChannelsLast),
                    Catch::Contains("4-D") && Catch::Contains("[3, 4]"));
  Tensor empty_nhwc = empty({2, 3, 4, 5}, {}, MemoryFormat::ChannelsLast);
  CHECK(is_contiguous_in(empty_nhwc, MemoryFormat::ChannelsLast));
}

TEST_CASE("to_each gives what to() of each gives: values, layouts, bytes and a gradient node per result", "[copy]") {
  Generator generator(13);
  auto parameter = [&](const Shape& sizes) {
    return randn(sizes, {}, &generator).requires_grad_();
  };
  const Tensor nhwc = parameter({2, 3, 4, 5}).detach().contiguous(MemoryFormat::ChannelsLast).requires_grad_();
  const Tensor base = parameter({5, 7});
  // Batched: dense float32 (row-major, channels_last, empty, without grad); one to() each:
  // a transposed view, a float64 tensor, a tensor already in the target dtype.
  const std::vector<Tensor> inputs{parameter({3, 5}),   nhwc,
                                   parameter({0, 4}),   randn({9}, {}, &generator),
                                   base.t(),            leaf({2, 2}, 14),
                                   randn({3}, {.dtype = DType::BFloat16}, &generator)};
  const int64_t requested_before = stats().requested_bytes.current;
  const std::vector<Tensor> outputs = to_each(inputs, DType::BFloat16);
  const int64_t requested = stats().requested_bytes.current - requested_before;
  REQUIRE(outputs.size() == inputs.size());
  int64_t expected_bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("tensor " << i);
    const Tensor expected = to(inputs[i], DType::BFloat16);
    CHECK(outputs[i].dtype() == DType::BFloat16);
    CHECK(outputs[i].sizes() == expected.sizes());
    CHECK(outputs[i].strides() == expected.strides());
    CHECK(to(outputs[i], DType::Float32).to_vector<float>() == to(expected, DType::Float32).to_vector<float>());
    CHECK(outputs[i].requires_grad() == expected.requires_grad());
    CHECK(static_cast<bool>(outputs[i].grad_fn()) == static_cast<bool>(expected.grad_fn()));
    if (outputs[i].grad_fn()) CHECK(std::string(outputs[i].grad_fn()->name()) == "ToCopyBackward");
    if (!inputs[i].is_same(expected)) expected_bytes += expected.nbytes();
  }
  CHECK(outputs.back().is_same(inputs.back()));  // nothing to convert
  CHECK(requested == expected_bytes);
  // Each result has its own node: a gradient through one reaches its input alone, converted
  // back to the input's dtype and layout.
  CHECK(outputs[0].grad_fn() != outputs[1].grad_fn());
  sum(mul(to(outputs[1], DType::Float32), 3.0)).backward();
  REQUIRE(nhwc.grad().defined());
  CHECK(nhwc.grad().dtype() == DType::Float32);
  CHECK(nhwc.grad().strides() == nhwc.strides());
  CHECK(nhwc.grad().contiguous().to_vector<float>() == std::vector<float>(120, 3.0f));
  CHECK_FALSE(inputs[0].grad().defined());
  sum(to(outputs[4], DType::Float32)).backward();
  CHECK(base.grad().to_vector<float>() == std::vector<float>(35, 1.0f));
}
