// tests/autograd/test_mlp.cpp — mg::mlp (autograd/mlp.h), the fused c_proj(gelu(c_fc(x))),
// against the chain linear -> gelu -> linear it replaces: equal values and gradients (bit
// for bit on the CPU, both gelu forms, with and without biases), gradcheck through all five
// inputs, bfloat16 autocast, a selective checkpoint, the ACTIVATION bytes it saves (gelu's
// output, rows x hidden elements) and the errors.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor_checks.h"
#include "memgrad/autocast/autocast.h"
#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/gradcheck.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/mlp.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;
using mg_test::max_abs_difference;

namespace {

Tensor normal(const Shape& sizes, uint64_t seed, bool requires_grad = true, DType dtype = DType::Float64) {
  Generator generator(seed);
  return randn(sizes, {.dtype = dtype, .requires_grad = requires_grad}, &generator);
}

// x (2, 3, in) and the two layers' parameters, in = out = 5, hidden = 7.
struct Operands {
  Tensor x, fc_weight, fc_bias, proj_weight, proj_bias;
  std::vector<Tensor> all() const { return {x, fc_weight, fc_bias, proj_weight, proj_bias}; }
};
Operands operands(bool with_biases, DType dtype = DType::Float64, uint64_t seed = 10) {
  const int64_t in = 5, hidden = 7, out = 5;
  return {normal({2, 3, in}, seed, true, dtype), normal({hidden, in}, seed + 1, true, dtype),
          with_biases ? normal({hidden}, seed + 2, true, dtype) : Tensor(),
          normal({out, hidden}, seed + 3, true, dtype), with_biases ? normal({out}, seed + 4, true, dtype) : Tensor()};
}

Tensor fused(const std::vector<Tensor>& in, GeluApproximate approximate) {
  return mlp(in[0], in[1], in[2], in[3], in[4], approximate);
}
Tensor chain(const std::vector<Tensor>& in, GeluApproximate approximate) {
  return linear(gelu(linear(in[0], in[1], in[2]), approximate), in[3], in[4]);
}

// The gradients of sum(output * weights) with respect to every defined input.
std::vector<Tensor> gradients_of(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                 const std::vector<Tensor>& inputs) {
  for (const Tensor& input : inputs) {
    if (input.defined()) input.set_grad(Tensor());
  }
  Tensor output = fn(inputs);
  Tensor weights = normal(output.sizes(), 99, false, output.dtype());
  sum(output * weights).backward();
  std::vector<Tensor> grads;
  for (const Tensor& input : inputs) grads.push_back(input.defined() ? input.grad() : Tensor());
  return grads;
}

int64_t activation_bytes() { return allocator_for(Device::cpu()).stats().category(MemoryCategory::Activation).current; }

const GeluApproximate kForms[] = {GeluApproximate::None, GeluApproximate::Tanh};

}  // namespace

TEST_CASE("mlp equals linear -> gelu -> linear bit for bit, with one node", "[mlp]") {
  for (GeluApproximate form : kForms) {
    for (bool with_biases : {true, false}) {
      for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16}) {
        INFO("tanh " << (form == GeluApproximate::Tanh) << " biases " << with_biases << " " << dtype);
        Operands in = operands(with_biases, dtype);
        Tensor output = fused(in.all(), form);
        CHECK(output.sizes() == Shape{2, 3, 5});
        CHECK(output.dtype() == dtype);
        REQUIRE(output.grad_fn() != nullptr);
        CHECK(std::string(output.grad_fn()->name()) == "MlpBackward");
        CHECK(output.grad_fn()->next_edges().size() == 5);
        CHECK(max_abs_difference(output, chain(in.all(), form)) == 0.0);
      }
    }
  }
}

TEST_CASE("mlp's gradients equal the chain's and finite differences, through all five inputs", "[mlp]") {
  for (GeluApproximate form : kForms) {
    for (bool with_biases : {true, false}) {
      INFO("tanh " << (form == GeluApproximate::Tanh) << " biases " << with_biases);
      Operands in = operands(with_biases);
      std::vector<Tensor> expected = gradients_of([&](const auto& v) { return chain(v, form); }, in.all());
      std::vector<Tensor> actual = gradients_of([&](const auto& v) { return fused(v, form); }, in.all());
      for (size_t i = 0; i < expected.size(); ++i) {
        INFO("input " << i);
        REQUIRE(actual[i].defined() == expected[i].defined());
        if (expected[i].defined()) CHECK(max_abs_difference(actual[i], expected[i]) <= 1e-12);
      }
      GradcheckResult result = gradcheck([&](const std::vector<Tensor>& v) { return fused(v, form); }, in.all());
      INFO(result.message);
      CHECK(result.passed);
    }
  }
  SECTION("only the gradients asked for: a frozen first layer, only c_proj's bias, a frozen input") {
    Operands in = operands(true);
    Tensor x = in.x.detach();
    Tensor fc_weight = in.fc_weight.detach(), fc_bias = in.fc_bias.detach();
    GradcheckResult result = gradcheck(
        [&](const std::vector<Tensor>& v) { return mlp(x, fc_weight, fc_bias, v[0], v[1], GeluApproximate::Tanh); },
        {in.proj_weight, in.proj_bias});
    INFO(result.message);
    CHECK(result.passed);
    Tensor proj_weight = in.proj_weight.detach();
    result = gradcheck(
        [&](const std::vector<Tensor>& v) { return mlp(x, fc_weight, fc_bias, proj_weight, v[0], GeluApproximate::None); },
        {in.proj_bias});
    INFO(result.message);
    CHECK(result.passed);
    result = gradcheck(
        [&](const std::vector<Tensor>& v) { return mlp(x, v[0], v[1], v[2], v[3], GeluApproximate::None); },
        {in.fc_weight, in.fc_bias, in.proj_weight, in.proj_bias});
    INFO(result.message);
    CHECK(result.passed);
  }
}

TEST_CASE("mlp under bfloat16 autocast runs in bfloat16, close to the chain", "[mlp]") {
  Operands in = operands(true, DType::Float32, 20);
  amp::AutocastGuard autocast(DType::BFloat16, DeviceType::CPU);
  std::vector<Tensor> expected =
      gradients_of([](const auto& v) { return chain(v, GeluApproximate::Tanh); }, in.all());
  Tensor chain_output = chain(in.all(), GeluApproximate::Tanh);
  std::vector<Tensor> actual = gradients_of([](const auto& v) { return fused(v, GeluApproximate::Tanh); }, in.all());
  Tensor output = fused(in.all(), GeluApproximate::Tanh);
  CHECK(output.dtype() == DType::BFloat16);
  CHECK(max_abs_difference(output, chain_output) == 0.0);  // the same kernels on the same bf16 values
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("input " << i);
    CHECK(actual[i].dtype() == DType::Float32);  // .grad of a float32 leaf
    // bfloat16 has 8 significant bits; the sums may round in another order.
    CHECK(max_abs_difference(actual[i], expected[i]) <= 2e-2 * (1.0 + max_abs_difference(expected[i], zeros_like(expected[i]))));
  }
}

TEST_CASE("mlp keeps x and the pre-activation for backward, not gelu's output", "[mlp][memory]") {
  for (DType dtype : {DType::Float64, DType::BFloat16}) {
    INFO(dtype);
    Operands in = operands(true, dtype, 30);
    for (const Tensor& parameter : {in.fc_weight, in.fc_bias, in.proj_weight, in.proj_bias}) {
      parameter.set_memory_category(MemoryCategory::Parameter);
    }
    const int64_t rows = 6, hidden = 7, element = static_cast<int64_t>(in.x.element_size());
    // Parameters stay PARAMETER when saved: ACTIVATION holds what each op adds.
    const int64_t before = activation_bytes();
    int64_t chain_kept = 0, fused_kept = 0;
    {
      Tensor output = chain(in.all(), GeluApproximate::Tanh);
      chain_kept = activation_bytes() - before;
      sum(output).backward();
    }
    {
      Tensor output = fused(in.all(), GeluApproximate::Tanh);
      fused_kept = activation_bytes() - before;
      sum(output).backward();
      CHECK(activation_bytes() == before);  // released by backward
    }
    CHECK(fused_kept == static_cast<int64_t>(in.x.nbytes()) + rows * hidden * element);  // x and the pre-activation
    CHECK(chain_kept - fused_kept == rows * hidden * element);                           // gelu's output
  }
}

TEST_CASE("mlp in a selective checkpoint keeps both products and gives the unchecked gradients", "[mlp][checkpoint]") {
  for (GeluApproximate form : kForms) {
    Operands in = operands(true, DType::Float64, 40);
    auto block = [&](const Tensor& x) { return fused({x, in.fc_weight, in.fc_bias, in.proj_weight, in.proj_bias}, form); };
    std::vector<Tensor> expected = gradients_of([&](const auto& v) { return block(v[0]); }, in.all());
    for (const CheckpointPolicy& policy : {CheckpointPolicy{}, CheckpointPolicy{OpKind::Matmul}}) {
      std::vector<Tensor> actual =
          gradients_of([&](const auto& v) { return checkpoint(block, v[0], policy); }, in.all());
      for (size_t i = 0; i < expected.size(); ++i) {
        INFO("input " << i);
        CHECK(max_abs_difference(actual[i], expected[i]) == 0.0);
      }
    }
    // Held between forward and backward: the checkpoint's input, and under the Matmul policy
    // both products too (the (6, 7) pre-activation and the (6, 5) output, float64), which the
    // recompute then takes instead of running the products again.
    auto held = [&](const CheckpointPolicy& policy) {
      const int64_t before = activation_bytes();
      Tensor output = checkpoint(block, in.x, policy);
      const int64_t kept = activation_bytes() - before;
      sum(output).backward();
      return kept;
    };
    CHECK(held(CheckpointPolicy{OpKind::Matmul}) - held(CheckpointPolicy{}) == 6 * (7 + 5) * 8);
  }
}

TEST_CASE("mlp errors name the shapes and dtypes", "[mlp]") {
  Operands in = operands(true);
  auto message = [&](const Tensor& x, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
                     const Tensor& proj_bias) {
    return error_message([&] { mlp(x, fc_weight, fc_bias, proj_weight, proj_bias, GeluApproximate::Tanh); });
  };
  std::string text = message(normal({2, 4}, 1), in.fc_weight, in.fc_bias, in.proj_weight, in.proj_bias);
  CHECK(contains(text, "c_fc's weight has shape [7, 5]"));
  CHECK(contains(text, "the input has 4 features"));
  text = message(in.x, in.fc_weight, in.fc_bias, normal({5, 6}, 2), in.proj_bias);
  CHECK(contains(text, "c_proj's weight has shape [5, 6]"));
  CHECK(contains(text, "c_fc's output has 7 features"));
  text = message(in.x, in.fc_weight, normal({6}, 3), in.proj_weight, in.proj_bias);
  CHECK(contains(text, "c_fc's bias has shape [6]"));
  text = message(in.x, in.fc_weight, in.fc_bias, in.proj_weight, normal({5}, 4, false, DType::Float32));
  CHECK(contains(text, "c_proj's bias has dtype float32"));
  text = message(in.x, in.fc_weight.to(DType::Float32), in.fc_bias, in.proj_weight, in.proj_bias);
  CHECK(contains(text, "c_fc's weight has dtype float32 but the input has float64"));
  CHECK(contains(text, "Hint"));
  text = message(in.x, Tensor(), in.fc_bias, in.proj_weight, in.proj_bias);
  CHECK(contains(text, "mlp: got an undefined tensor"));
  text = message(arange(5.0).to(DType::Int64), in.fc_weight, in.fc_bias, in.proj_weight, in.proj_bias);
  CHECK(contains(text, "expected a floating-point tensor"));
}
