// tests/autograd/test_norm_add_relu.cpp — batch_norm_add_relu against add_relu(batch_norm):
// forward, running statistics, gradients against finite differences, which inputs get
// gradients, the bytes it allocates and saves, when its backward may overwrite the incoming
// gradient, and its errors; and batch norm with statistics given (ChannelSums, what
// conv2d_with_statistics returns) against batch norm computing them.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "autograd/op_test_support.h"

using namespace mg;
using mg_test::check_gradients;
using mg_test::normal;

// batch_norm_add_relu is relu(batch_norm(x) + residual): one node when training with a
// residual of the input's dtype and layout, add_relu of batch_norm otherwise.
namespace {

Tensor in_layout(const Tensor& x, MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast ? x.contiguous(MemoryFormat::ChannelsLast) : x;
}

// Whether relu(y + residual)'s mask differs from relu(y)'s both ways: some positive y
// clamped, some negative y let through (otherwise the test could not tell the masks apart).
bool mask_needs_the_residual(const Tensor& y, const Tensor& residual) {
  std::vector<double> normalised = y.to_vector<double>(), added = residual.to_vector<double>();
  bool clamped = false, passed = false;
  for (size_t i = 0; i < normalised.size(); ++i) {
    clamped |= normalised[i] > 0 && normalised[i] + added[i] <= 0;
    passed |= normalised[i] <= 0 && normalised[i] + added[i] > 0;
  }
  return clamped && passed;
}

struct AddReluCase {
  Shape sizes;
  MemoryFormat format;
  bool affine;  // with weight and bias
};

void check_close(const Tensor& actual, const Tensor& expected, double margin) {
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(e[i]).margin(margin));
}

}  // namespace

TEST_CASE("batch_norm_add_relu equals add_relu of batch_norm: forward, running statistics, gradients",
          "[norm]") {
  const AddReluCase test = GENERATE(AddReluCase{{4, 3, 3, 2}, MemoryFormat::Contiguous, true},
                                    AddReluCase{{4, 3, 3, 2}, MemoryFormat::ChannelsLast, true},
                                    AddReluCase{{4, 3, 3, 2}, MemoryFormat::Contiguous, false},
                                    AddReluCase{{3, 5, 2, 3}, MemoryFormat::ChannelsLast, false},
                                    AddReluCase{{12, 3}, MemoryFormat::Contiguous, true});
  // Copies: lambdas below capture them (clang 14 cannot capture structured bindings).
  const Shape sizes = test.sizes;
  const MemoryFormat format = test.format;
  const bool affine = test.affine;
  INFO("input " << sizes << " in " << format << (affine ? ", with" : ", without") << " weight and bias");
  const int64_t channels = sizes[1];
  Tensor x = normal(sizes, 80, true), residual = normal(sizes, 81, true);
  Tensor weight = affine ? normal({channels}, 82, true) : Tensor();
  Tensor bias = affine ? normal({channels}, 83, true) : Tensor();
  auto running_mean = [&] { return from_vector<double>(std::vector<double>(channels, 0.5)); };
  auto running_var = [&] { return ones({channels}, {.dtype = DType::Float64}); };
  Tensor fused_mean = running_mean(), fused_var = running_var();
  Tensor unfused_mean = running_mean(), unfused_var = running_var();

  Tensor out = batch_norm_add_relu(in_layout(x, format), in_layout(residual, format), fused_mean, fused_var, weight,
                                   bias, true);
  Tensor expected = add_relu(batch_norm(in_layout(x, format), unfused_mean, unfused_var, weight, bias, true),
                             in_layout(residual, format));
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(std::string(out.grad_fn()->name()) == "BatchNormAddReluBackward");
  CHECK(out.grad_fn()->next_edges().size() == 4);
  if (format == MemoryFormat::ChannelsLast) CHECK(is_contiguous_in(out, MemoryFormat::ChannelsLast));
  CHECK(mask_needs_the_residual(batch_norm(x.detach(), {}, {}, weight.defined() ? weight.detach() : Tensor(),
                                           bias.defined() ? bias.detach() : Tensor(), true),
                                residual.detach()));
  check_close(out, expected, 1e-12);
  // The statistics come from the same kernel pass either way: equal, not just close.
  CHECK(fused_mean.to_vector<double>() == unfused_mean.to_vector<double>());
  CHECK(fused_var.to_vector<double>() == unfused_var.to_vector<double>());

  std::vector<Tensor> leaves = {x, residual};
  if (affine) leaves.insert(leaves.end(), {weight, bias});
  Tensor grad_output = normal(sizes, 84);
  sum(mul(out, grad_output)).backward();
  std::vector<Tensor> fused_grads;
  for (const Tensor& leaf : leaves) {
    fused_grads.push_back(leaf.grad());
    leaf.set_grad(Tensor());
  }
  sum(mul(expected, grad_output)).backward();
  for (size_t k = 0; k < leaves.size(); ++k) {
    INFO("gradient " << k << " of x, residual, weight, bias");
    check_close(fused_grads[k], leaves[k].grad(), 1e-12);
  }

  check_gradients(
      [&](const std::vector<Tensor>& in) {
        return batch_norm_add_relu(in_layout(in[0], format), in_layout(in[1], format), Tensor(), Tensor(),
                                   affine ? in[2] : Tensor(), affine ? in[3] : Tensor(), true);
      },
      [&] {
        std::vector<Tensor> fresh;
        for (const Tensor& leaf : leaves) fresh.push_back(leaf.detach().requires_grad_());
        return fresh;
      }());
}

TEST_CASE("batch_norm_add_relu's gradients reach only the inputs that need them", "[norm]") {
  Tensor x = normal({4, 3, 2, 2}, 90), residual = normal({4, 3, 2, 2}, 91);
  Tensor weight = normal({3}, 92), bias = normal({3}, 93);
  auto run = [&](bool x_grad, bool residual_grad, bool weight_grad) {
    Tensor x_leaf = x.detach().requires_grad_(x_grad), residual_leaf = residual.detach().requires_grad_(residual_grad);
    Tensor weight_leaf = weight.detach().requires_grad_(weight_grad);
    Tensor out = batch_norm_add_relu(x_leaf, residual_leaf, {}, {}, weight_leaf, bias, true);
    sum(mul(out, normal({4, 3, 2, 2}, 94))).backward();
    return std::vector<Tensor>{x_leaf.grad(), residual_leaf.grad(), weight_leaf.grad()};
  };
  std::vector<Tensor> all = run(true, true, true);
  std::vector<Tensor> only_residual = run(false, true, false);
  CHECK(!only_residual[0].defined());
  CHECK(!only_residual[2].defined());
  check_close(only_residual[1], all[1], 0.0);
  std::vector<Tensor> only_x = run(true, false, false);
  CHECK(!only_x[1].defined());
  check_close(only_x[0], all[0], 0.0);
  std::vector<Tensor> only_weight = run(false, false, true);
  check_close(only_weight[2], all[2], 0.0);
}

TEST_CASE("batch_norm_add_relu in evaluation and with residuals the kernels do not take is add_relu of batch_norm",
          "[norm]") {
  Tensor running_mean = from_vector<double>({0.3, -0.7, 0.1}), running_var = from_vector<double>({0.5, 2.0, 1.0});
  Tensor x = normal({4, 3, 3, 2}, 100, true), residual = normal({4, 3, 3, 2}, 101, true);
  Tensor weight = normal({3}, 102, true), bias = normal({3}, 103, true);
  auto unfused = [&](const Tensor& input, const Tensor& added, bool training) {
    return training ? add_relu(batch_norm(input, Tensor(), Tensor(), weight, bias, true), added)
                    : add_relu(batch_norm(input, running_mean, running_var, weight, bias, false), added);
  };
  auto fused = [&](const Tensor& input, const Tensor& added, bool training) {
    return training ? batch_norm_add_relu(input, added, Tensor(), Tensor(), weight, bias, true)
                    : batch_norm_add_relu(input, added, running_mean, running_var, weight, bias, false);
  };
  auto check_equal = [](const Tensor& actual, const Tensor& expected) {
    CHECK(actual.dtype() == expected.dtype());
    CHECK(actual.to_vector<double>() == expected.to_vector<double>());
  };

  SECTION("evaluation, with gradients: the composite, whose gradients are right") {
    Tensor out = fused(x, residual, false);
    CHECK(std::string(out.grad_fn()->name()) == "AddReluBackward");
    check_equal(out, unfused(x, residual, false));
    check_gradients([&](const std::vector<Tensor>& in) {
      return batch_norm_add_relu(in[0], in[1], running_mean, running_var, in[2], in[3], false);
    }, {x, residual, weight, bias});
    // Evaluation leaves the running statistics alone.
    CHECK(running_mean.to_vector<double>() == std::vector<double>{0.3, -0.7, 0.1});
  }
  SECTION("evaluation, without gradients") {
    NoGradGuard no_grad;
    check_equal(fused(x, residual, false), unfused(x, residual, false));
    check_equal(fused(in_layout(x, MemoryFormat::ChannelsLast), residual, false),
                unfused(in_layout(x, MemoryFormat::ChannelsLast), residual, false));
  }
  SECTION("a residual of another dtype: promoted as add_relu promotes") {
    Tensor narrow = residual.detach().to(DType::Float32);
    Tensor out = fused(x, narrow, true);
    CHECK(std::string(out.grad_fn()->name()) == "AddReluBackward");
    check_equal(out, unfused(x, narrow, true));
  }
  SECTION("a residual in another layout, or not dense") {
    Tensor other_layout = in_layout(residual, MemoryFormat::ChannelsLast);
    Tensor out = fused(x, other_layout, true);
    CHECK(std::string(out.grad_fn()->name()) == "AddReluBackward");
    check_equal(out, unfused(x, other_layout, true));
    Tensor strided = normal({4, 3, 3, 4}, 104).narrow(3, 1, 2);  // every other pair of a row
    CHECK(std::string(fused(x, strided, true).grad_fn()->name()) == "AddReluBackward");
    check_equal(fused(x, strided, true), unfused(x, strided, true));
  }
}

TEST_CASE("batch_norm_add_relu writes only its output and saves it, not batch_norm's", "[norm]") {
  const Shape sizes{8, 16, 16, 16};
  const int64_t activation_bytes = sizes.numel() * 8;
  Tensor x = normal(sizes, 110, true), residual = normal(sizes, 111, true);
  CachingAllocator& allocator = allocator_for(Device::cpu());
  auto peak_rise = [&](const std::function<Tensor()>& forward) {
    allocator.reset_peak_stats();
    int64_t before = allocator.stats().allocated_bytes.current;
    Tensor out = forward();
    return allocator.stats().allocated_bytes.peak - before;
  };
  // The output and two statistics of 16 values (rounded up by the allocator).
  int64_t fused = peak_rise([&] { return batch_norm_add_relu(x, residual, {}, {}, {}, {}, true); });
  int64_t unfused = peak_rise([&] { return add_relu(batch_norm(x, {}, {}, {}, {}, true), residual); });
  CHECK(fused < activation_bytes + 4096);
  CHECK(unfused >= 2 * activation_bytes);
}

TEST_CASE("batch_norm_add_relu's backward overwrites the incoming gradient only when nothing else holds it",
          "[norm]") {
  const Shape sizes{8, 16, 16, 16};
  Tensor x = normal(sizes, 130, true), residual = normal(sizes, 131, true), weights = normal(sizes, 132);
  CachingAllocator& allocator = allocator_for(Device::cpu());
  // The rise of the allocated bytes while backward runs, over those before it.
  auto backward_peak_rise = [&](const Tensor& out) {
    Tensor loss = sum(mul(out, weights));
    allocator.reset_peak_stats();
    int64_t before = allocator.stats().allocated_bytes.current;
    loss.backward();
    return allocator.stats().allocated_bytes.peak - before;
  };
  int64_t fused = backward_peak_rise(batch_norm_add_relu(x, residual, {}, {}, {}, {}, true));
  Tensor fused_x_grad = x.grad(), fused_residual_grad = residual.grad();
  x.set_grad(Tensor());
  residual.set_grad(Tensor());
  int64_t unfused = backward_peak_rise(add_relu(batch_norm(x, {}, {}, {}, {}, true), residual));
  // Fused: the incoming gradient (mul's backward makes it), overwritten with the
  // residual's, and grad_input; the leaves' .grad take both over. Unfused: add_relu's
  // masked gradient goes to batch_norm's node and to the residual, so the residual's .grad
  // is a copy of it, made while batch_norm's grad_input is yet to come.
  const int64_t activation_bytes = sizes.numel() * 8;
  CHECK(fused == 2 * activation_bytes);
  CHECK(unfused == 3 * activation_bytes);
  check_close(fused_x_grad, x.grad(), 1e-12);
  check_close(fused_residual_grad, residual.grad(), 0.0);

  // A hook that keeps the incoming gradient: the node must leave it as it came.
  Tensor out = batch_norm_add_relu(x, residual, {}, {}, {}, {}, true);
  Tensor kept;
  out.register_hook([&](const Tensor& grad) {
    kept = grad;
    return Tensor();
  });
  sum(mul(out, weights)).backward();
  REQUIRE(kept.defined());
  CHECK(kept.to_vector<double>() == weights.to_vector<double>());
}

TEST_CASE("batch_norm_add_relu errors name the op, the shapes, dtypes and devices", "[norm]") {
  Tensor x = normal({4, 3, 2, 2}, 120);
  auto message = [&](const Tensor& input, const Tensor& residual) {
    try {
      batch_norm_add_relu(input, residual, {}, {}, {}, {}, true);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  std::string broadcast = message(x, normal({1, 3, 1, 1}, 121));
  CHECK_THAT(broadcast, Catch::Contains("batch_norm_add_relu: expected a residual of the input's shape [4, 3, 2, 2], "
                                        "got shape [1, 3, 1, 1] (it is not broadcast)"));
  CHECK_THAT(broadcast, Catch::Contains("Hint:"));
  CHECK_THAT(message(x, zeros({4, 3, 2, 2}, {.dtype = DType::Int64})),
             Catch::Contains("expected a floating-point residual, got int64"));
  CHECK_THAT(message(x, empty({4, 3, 2, 2}, {.dtype = DType::Float64, .device = Device::simulated(3)})),
             Catch::Contains("expected the residual on the input's device cpu"));
  CHECK_THAT(message(x, Tensor()), Catch::Contains("batch_norm_add_relu: got an undefined residual"));
  CHECK_THAT(message(normal({4, 3, 2}, 122), normal({4, 3, 2}, 123)),
             Catch::Contains("batch_norm_add_relu: expected a 2-D (N, C) or 4-D (N, C, H, W) input"));
  CHECK_THROWS_WITH(batch_norm_add_relu(x, normal({4, 3, 2, 2}, 124), {}, {}, normal({4}, 125), {}, true),
                    Catch::Contains("batch_norm_add_relu: expected weight of shape [3]"));
  CHECK_THROWS_WITH(batch_norm_add_relu(normal({1, 3}, 126), normal({1, 3}, 127), {}, {}, {}, {}, true),
                    Catch::Contains("batch_norm_add_relu: expected more than 1 value per channel"));
}

// ---- statistics handed over by the convolution before (core/channel_sums.h) ----

namespace {

// The input's per-channel float32 sum and sum of squares over every dim but 1.
ChannelSums sums_of(const Tensor& x) {
  NoGradGuard no_grad;
  const std::vector<int64_t> dims = x.dim() == 4 ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
  return {sum(x.detach(), dims).to(DType::Float32), sum(mul(x.detach(), x.detach()), dims).to(DType::Float32)};
}

}  // namespace

TEST_CASE("batch norm with the statistics given equals batch norm computing them: values, running statistics, "
          "gradients",
          "[norm]") {
  const MemoryFormat format = GENERATE(MemoryFormat::Contiguous, MemoryFormat::ChannelsLast);
  const bool add = GENERATE(false, true);
  INFO((add ? "batch_norm_add_relu" : "batch_norm_relu") << " in " << format);
  const Shape sizes{4, 3, 5, 3};
  // Inputs of a convolution's order: |mean| within a few std of 0, where plain float32
  // sums keep about 20 bits of the variance.
  Tensor x = normal(sizes, 90, true), residual = normal(sizes, 91);
  Tensor weight = normal({3}, 92, true), bias = normal({3}, 93, true);
  Tensor given_mean = zeros({3}, {.dtype = DType::Float64}), given_var = ones({3}, {.dtype = DType::Float64});
  Tensor own_mean = zeros({3}, {.dtype = DType::Float64}), own_var = ones({3}, {.dtype = DType::Float64});
  auto run = [&](const Tensor& running_mean, const Tensor& running_var, const ChannelSums& statistics) {
    const Tensor input = in_layout(x, format);
    return add ? batch_norm_add_relu(input, in_layout(residual, format), running_mean, running_var, weight, bias,
                                     true, 0.1, 1e-5, statistics)
               : batch_norm_relu(input, running_mean, running_var, weight, bias, true, 0.1, 1e-5, statistics);
  };
  Tensor with_given = run(given_mean, given_var, sums_of(x));
  Tensor computed = run(own_mean, own_var, {});
  // float32 sums of float64 values: the mean and variance agree to float32's precision.
  check_close(with_given, computed, 1e-5);
  check_close(given_mean, own_mean, 1e-6);
  check_close(given_var, own_var, 1e-6);

  Tensor grad_output = normal(sizes, 94);
  sum(mul(with_given, grad_output)).backward();
  const std::vector<Tensor> given_grads = {x.grad(), weight.grad(), bias.grad()};
  for (Tensor leaf : {x, weight, bias}) leaf.set_grad(Tensor());
  sum(mul(computed, grad_output)).backward();
  const std::vector<Tensor> own_grads = {x.grad(), weight.grad(), bias.grad()};
  for (size_t k = 0; k < own_grads.size(); ++k) {
    INFO("gradient " << k << " of x, weight, bias");
    check_close(given_grads[k], own_grads[k], 1e-4);
  }
}

TEST_CASE("batch norm ignores given statistics in evaluation and refuses malformed ones", "[norm]") {
  Tensor x = normal({4, 3, 2, 2}, 95);
  Tensor running_mean = zeros({3}, {.dtype = DType::Float64}), running_var = ones({3}, {.dtype = DType::Float64});
  // Evaluation normalises with the running statistics whatever sums come along.
  ChannelSums nonsense{full({3}, 1e6), full({3}, 1e6)};
  check_close(batch_norm(x, running_mean, running_var, Tensor(), Tensor(), false, 0.1, 1e-5, nonsense),
              batch_norm(x, running_mean, running_var, Tensor(), Tensor(), false), 0.0);
  // Training takes the sums as they come, without looking at the input again: the sums of
  // x + 1 move the running mean by momentum * 1 against x's own.
  Tensor shifted_mean = zeros({3}, {.dtype = DType::Float64}), shifted_var = ones({3}, {.dtype = DType::Float64});
  Tensor own_mean = zeros({3}, {.dtype = DType::Float64}), own_var = ones({3}, {.dtype = DType::Float64});
  (void)batch_norm(x, shifted_mean, shifted_var, Tensor(), Tensor(), true, 0.1, 1e-5, sums_of(add(x, 1.0)));
  (void)batch_norm(x, own_mean, own_var, Tensor(), Tensor(), true, 0.1, 1e-5);
  check_close(shifted_mean, add(own_mean, 0.1), 1e-6);
  check_close(shifted_var, own_var, 1e-5);  // a shift leaves the variance
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(batch_norm_relu(x, running_mean, running_var, Tensor(), Tensor(), true, 0.1, 1e-5,
                                    {zeros({3}, {.dtype = DType::Float64}), zeros({3}, {.dtype = DType::Float64})}),
                    Contains("batch_norm_relu: expected the statistics as contiguous float32 tensors of shape [3]") &&
                        Contains("float64"));
  CHECK_THROWS_WITH(batch_norm(x, running_mean, running_var, Tensor(), Tensor(), true, 0.1, 1e-5,
                               {zeros({4}), zeros({4})}),
                    Contains("of shape [3]") && Contains("got float32 of shape [4]"));
  CHECK_THROWS_WITH(batch_norm(x, running_mean, running_var, Tensor(), Tensor(), true, 0.1, 1e-5, {zeros({3}), {}}),
                    Contains("both given or both undefined"));
}
