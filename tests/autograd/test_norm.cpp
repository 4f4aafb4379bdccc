// tests/autograd/test_norm.cpp — batch_norm: forward values against the formula written
// out by hand, gradients (training and evaluation) against finite differences, running
// statistics against PyTorch's update rule (momentum, unbiased variance), the batch
// counter (num_batches_tracked), and the errors;
// batch_norm_relu against relu(batch_norm) and finite differences. batch_norm_add_relu and
// the statistics given by a convolution: test_norm_add_relu.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/node.h"
#include "memgrad/autograd/norm.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "autograd/op_test_support.h"

using namespace mg;
using mg_test::check_gradients;
using mg_test::normal;

namespace {

struct Stats {
  std::vector<double> mean, biased_var, unbiased_var;
};

// Per-channel statistics of a row-major (N, C, inner) buffer.
Stats channel_stats(const std::vector<double>& x, int64_t batch, int64_t channels, int64_t inner) {
  Stats stats;
  int64_t count = batch * inner;
  for (int64_t c = 0; c < channels; ++c) {
    double total = 0, squares = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) total += x[(n * channels + c) * inner + i];
    double mean = total / count;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) squares += std::pow(x[(n * channels + c) * inner + i] - mean, 2);
    stats.mean.push_back(mean);
    stats.biased_var.push_back(squares / count);
    stats.unbiased_var.push_back(squares / (count - 1));
  }
  return stats;
}

}  // namespace

TEST_CASE("batch_norm training forward matches the formula", "[norm]") {
  const int64_t batch = 3, channels = 2, inner = 4;
  Tensor x = normal({batch, channels, 2, 2}, 1);
  Tensor weight = from_vector<double>({1.5, -0.5});
  Tensor bias = from_vector<double>({0.25, 2.0});
  Tensor out = batch_norm(x, Tensor(), Tensor(), weight, bias, /*training=*/true, 0.1, 1e-5);
  std::vector<double> values = x.to_vector<double>(), result = out.to_vector<double>();
  Stats stats = channel_stats(values, batch, channels, inner);
  std::vector<double> w = {1.5, -0.5}, b = {0.25, 2.0};
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (n * channels + c) * inner + i;
        double expected = (values[at] - stats.mean[c]) / std::sqrt(stats.biased_var[c] + 1e-5) * w[c] + b[c];
        CHECK(result[at] == Approx(expected).epsilon(1e-12).margin(1e-12));
      }
    }
  }
}

TEST_CASE("batch_norm evaluation forward uses the running statistics", "[norm]") {
  Tensor x = normal({4, 3}, 2);
  Tensor running_mean = from_vector<double>({0.5, -1.0, 2.0});
  Tensor running_var = from_vector<double>({1.0, 4.0, 0.25});
  Tensor weight = from_vector<double>({2.0, 1.0, -1.0});
  Tensor bias = from_vector<double>({0.0, 1.0, 0.5});
  Tensor out = batch_norm(x, running_mean, running_var, weight, bias, /*training=*/false, 0.1, 1e-3);
  std::vector<double> values = x.to_vector<double>(), result = out.to_vector<double>();
  std::vector<double> m = {0.5, -1.0, 2.0}, v = {1.0, 4.0, 0.25}, w = {2.0, 1.0, -1.0}, b = {0.0, 1.0, 0.5};
  for (int64_t n = 0; n < 4; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      double expected = (values[n * 3 + c] - m[c]) / std::sqrt(v[c] + 1e-3) * w[c] + b[c];
      CHECK(result[n * 3 + c] == Approx(expected).epsilon(1e-12).margin(1e-12));
    }
  }
  // Evaluation leaves the running statistics alone.
  CHECK(running_mean.to_vector<double>() == m);
  CHECK(running_var.to_vector<double>() == v);
}

TEST_CASE("batch_norm running statistics follow PyTorch's update", "[norm]") {
  const int64_t batch = 2, channels = 3, inner = 6;
  Tensor running_mean = zeros({channels}, {.dtype = DType::Float64});
  Tensor running_var = ones({channels}, {.dtype = DType::Float64});
  std::vector<double> expected_mean(channels, 0.0), expected_var(channels, 1.0);
  const double momentum = 0.1;
  uint64_t version = running_mean.version();
  for (uint64_t step = 0; step < 2; ++step) {
    Tensor x = normal({batch, channels, 2, 3}, 10 + step);
    batch_norm(x, running_mean, running_var, Tensor(), Tensor(), /*training=*/true, momentum, 1e-5);
    Stats stats = channel_stats(x.to_vector<double>(), batch, channels, inner);
    for (int64_t c = 0; c < channels; ++c) {
      expected_mean[c] = (1 - momentum) * expected_mean[c] + momentum * stats.mean[c];
      expected_var[c] = (1 - momentum) * expected_var[c] + momentum * stats.unbiased_var[c];
    }
  }
  std::vector<double> got_mean = running_mean.to_vector<double>(), got_var = running_var.to_vector<double>();
  for (int64_t c = 0; c < channels; ++c) {
    CHECK(got_mean[c] == Approx(expected_mean[c]).epsilon(1e-12));
    CHECK(got_var[c] == Approx(expected_var[c]).epsilon(1e-12));
  }
  CHECK(running_mean.version() > version);  // in-place updates are visible to autograd's checks
}

// nn::BatchNorm2d hands its counter to the op, whose kernel increments it (no launch of
// its own on CUDA): once per training call whatever path the op takes, never in evaluation.
TEST_CASE("batch_norm's ops count each training batch in num_batches_tracked, evaluation none", "[norm]") {
  Tensor running_mean = zeros({3}, {.dtype = DType::Float64}), running_var = ones({3}, {.dtype = DType::Float64});
  Tensor counter = zeros(Shape{}, {.dtype = DType::Int64});
  Tensor x = normal({4, 3, 2, 2}, 60), residual = normal({4, 3, 2, 2}, 61);
  // Six calls: the three ops, an (N, C) input, gradients wanted (evaluation's composite),
  // and a float32 residual (add_relu of batch_norm, unfused).
  auto run_all = [&](bool training) {
    batch_norm(x, running_mean, running_var, {}, {}, training, 0.1, 1e-5, {}, counter);
    batch_norm(normal({4, 3}, 62), running_mean, running_var, {}, {}, training, 0.1, 1e-5, {}, counter);
    batch_norm(normal({4, 3, 2, 2}, 63, true), running_mean, running_var, {}, {}, training, 0.1, 1e-5, {}, counter);
    batch_norm_relu(x, running_mean, running_var, {}, {}, training, 0.1, 1e-5, {}, counter);
    batch_norm_add_relu(x, residual, running_mean, running_var, {}, {}, training, 0.1, 1e-5, {}, counter);
    batch_norm_add_relu(x, residual.to(DType::Float32), running_mean, running_var, {}, {}, training, 0.1, 1e-5, {},
                        counter);
  };
  uint64_t version = counter.version();
  run_all(/*training=*/true);
  CHECK(counter.item<int64_t>() == 6);
  CHECK(counter.version() > version);  // an in-place update, visible to autograd's checks
  version = counter.version();
  run_all(/*training=*/false);
  CHECK(counter.item<int64_t>() == 6);
  CHECK(counter.version() == version);
  // Without running statistics the batch is counted all the same: the counter is the caller's.
  batch_norm(x, {}, {}, {}, {}, /*training=*/true, 0.1, 1e-5, {}, counter);
  CHECK(counter.item<int64_t>() == 7);
}

TEST_CASE("batch_norm training gradients match finite differences", "[norm]") {
  SECTION("(N, C, H, W)") {
    Tensor x = normal({3, 2, 2, 3}, 20, true), weight = normal({2}, 21, true), bias = normal({2}, 22, true);
    check_gradients(
        [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
        {x, weight, bias});
  }
  SECTION("(N, C)") {
    Tensor x = normal({5, 3}, 23, true), weight = normal({3}, 24, true), bias = normal({3}, 25, true);
    check_gradients(
        [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
        {x, weight, bias});
  }
  SECTION("no weight or bias") {
    Tensor x = normal({4, 2, 1, 3}, 26, true);
    check_gradients([](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), {}, {}, true); },
                    {x});
  }
  SECTION("with running statistics tracked") {
    Tensor x = normal({3, 2}, 27, true), weight = normal({2}, 28, true);
    Tensor running_mean = zeros({2}, {.dtype = DType::Float64}), running_var = ones({2}, {.dtype = DType::Float64});
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return batch_norm(in[0], running_mean, running_var, in[1], Tensor(), true);
        },
        {x, weight});
  }
}

TEST_CASE("batch_norm evaluation gradients match finite differences", "[norm]") {
  Tensor running_mean = from_vector<double>({0.3, -0.7}), running_var = from_vector<double>({0.5, 2.0});
  SECTION("(N, C, H, W)") {
    Tensor x = normal({2, 2, 3, 2}, 30, true), weight = normal({2}, 31, true), bias = normal({2}, 32, true);
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return batch_norm(in[0], running_mean, running_var, in[1], in[2], false);
        },
        {x, weight, bias});
  }
  SECTION("(N, C), a single sample") {
    Tensor x = normal({1, 2}, 33, true), weight = normal({2}, 34, true);
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return batch_norm(in[0], running_mean, running_var, in[1], Tensor(), false);
        },
        {x, weight});
  }
  SECTION("the composite and the kernel agree") {
    Tensor x = normal({2, 2, 3, 2}, 35, true), weight = normal({2}, 36), bias = normal({2}, 37);
    Tensor with_grad = batch_norm(x, running_mean, running_var, weight, bias, false);
    Tensor without_grad = batch_norm(x.detach(), running_mean, running_var, weight, bias, false);
    std::vector<double> a = with_grad.to_vector<double>(), b = without_grad.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("batch_norm of channels_last inputs: NCHW values, channels_last results, gradients", "[norm]") {
  // Layout changes through Tensor::contiguous(format), so gradcheck's leaves stay contiguous.
  auto channels_last = [](const Tensor& x) { return x.contiguous(MemoryFormat::ChannelsLast); };
  Tensor x = normal({3, 4, 2, 3}, 50, true), weight = normal({4}, 51, true), bias = normal({4}, 52, true);
  Tensor running_mean = from_vector<double>({0.3, -0.7, 0.1, 0.0}), running_var = from_vector<double>({0.5, 2.0, 1.0, 1.5});
  auto run = [&](const Tensor& input, const Tensor& w, const Tensor& b, bool training) {
    return training ? batch_norm(input, Tensor(), Tensor(), w, b, true)
                    : batch_norm(input, running_mean, running_var, w, b, false);
  };
  for (bool training : {true, false}) {
    INFO("training " << training);
    Tensor expected = run(x.detach(), weight.detach(), bias.detach(), training);
    Tensor actual = run(channels_last(x.detach()), weight.detach(), bias.detach(), training);
    CHECK(is_contiguous_in(actual, MemoryFormat::ChannelsLast));
    std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(e[i]).margin(1e-12));
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          Tensor out = run(channels_last(in[0]), in[1], in[2], training);
          CHECK(is_contiguous_in(out, MemoryFormat::ChannelsLast));
          return out;
        },
        {x, weight, bias});
  }
  SECTION("the running statistics match those of the NCHW input") {
    Tensor mean_nchw = zeros({4}, {.dtype = DType::Float64}), var_nchw = ones({4}, {.dtype = DType::Float64});
    Tensor mean_last = zeros({4}, {.dtype = DType::Float64}), var_last = ones({4}, {.dtype = DType::Float64});
    batch_norm(x.detach(), mean_nchw, var_nchw, Tensor(), Tensor(), true);
    batch_norm(channels_last(x.detach()), mean_last, var_last, Tensor(), Tensor(), true);
    std::vector<double> a = mean_last.to_vector<double>(), e = mean_nchw.to_vector<double>();
    std::vector<double> va = var_last.to_vector<double>(), ve = var_nchw.to_vector<double>();
    for (size_t c = 0; c < 4; ++c) {
      CHECK(a[c] == Approx(e[c]).margin(1e-14));
      CHECK(va[c] == Approx(ve[c]).margin(1e-14));
    }
  }
}

TEST_CASE("batch_norm training records one node", "[norm]") {
  Tensor x = normal({4, 3}, 40, true);
  Tensor out = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(std::string(out.grad_fn()->name()) == "BatchNormBackward");
}

TEST_CASE("batch_norm errors explain themselves", "[norm]") {
  Tensor running_mean = zeros({3}, {.dtype = DType::Float64}), running_var = ones({3}, {.dtype = DType::Float64});
  CHECK_THROWS_WITH(batch_norm(normal({1, 3}, 50), running_mean, running_var, {}, {}, true),
                    Catch::Contains("batch_norm: expected more than 1 value per channel when training, got input "
                                    "of shape"));
  CHECK_THROWS_WITH(batch_norm(normal({1, 3, 1, 1}, 51), {}, {}, {}, {}, true),
                    Catch::Contains("expected more than 1 value per channel"));
  CHECK_THROWS_WITH(batch_norm(normal({2, 3, 4}, 52), {}, {}, {}, {}, true), Catch::Contains("2-D (N, C) or 4-D"));
  CHECK_THROWS_WITH(batch_norm(normal({2, 3}, 53), {}, {}, {}, {}, false),
                    Catch::Contains("evaluation mode needs running_mean"));
  CHECK_THROWS_WITH(batch_norm(normal({2, 3}, 54), {}, {}, normal({4}, 55), {}, true),
                    Catch::Contains("expected weight of shape [3]"));
  CHECK_THROWS_WITH(batch_norm(normal({2, 3}, 56), zeros({2}, {.dtype = DType::Float64}), running_var, {}, {}, true),
                    Catch::Contains("running_mean"));
  CHECK_THROWS_WITH(batch_norm(zeros({2, 3}, {.dtype = DType::Int64}), {}, {}, {}, {}, true),
                    Catch::Contains("floating-point"));
  // The counter: one int64 (0-d) on the input's device, where the kernel increments it.
  auto count_with = [](const Tensor& counter) {
    batch_norm(normal({2, 3}, 58), {}, {}, {}, {}, true, 0.1, 1e-5, {}, counter);
  };
  CHECK_THROWS_WITH(count_with(zeros(Shape{})),
                    Catch::Contains("batch_norm: expected num_batches_tracked as a 0-d int64 tensor, got float32 of "
                                    "shape []"));
  CHECK_THROWS_WITH(count_with(zeros({1}, {.dtype = DType::Int64})),
                    Catch::Contains("0-d int64 tensor, got int64 of shape [1]"));
  CHECK_THROWS_WITH(count_with(zeros(Shape{}, {.dtype = DType::Int64, .device = Device::simulated(3)})),
                    Catch::Contains("batch_norm: expected num_batches_tracked on the input's device cpu, got "
                                    "simulated:3"));
  // A single sample is fine in evaluation.
  CHECK_NOTHROW(batch_norm(normal({1, 3}, 57), running_mean, running_var, {}, {}, false));
}

// batch_norm_relu is relu(batch_norm(...)) computed in one node.
TEST_CASE("batch_norm_relu equals relu of batch_norm, forward and gradients", "[norm]") {
  auto channels_last = [](const Tensor& x) { return x.contiguous(MemoryFormat::ChannelsLast); };
  Tensor running_mean = from_vector<double>({0.3, -0.7, 0.1}), running_var = from_vector<double>({0.5, 2.0, 1.0});
  for (bool training : {true, false}) {
    for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      INFO("training " << training << ", " << format);
      Tensor x = normal({4, 3, 3, 2}, 60, true), weight = normal({3}, 61, true), bias = normal({3}, 62, true);
      auto fused = [&](const std::vector<Tensor>& in) {
        Tensor input = format == MemoryFormat::ChannelsLast ? channels_last(in[0]) : in[0];
        return training ? batch_norm_relu(input, Tensor(), Tensor(), in[1], in[2], true)
                        : batch_norm_relu(input, running_mean, running_var, in[1], in[2], false);
      };
      auto unfused = [&](const std::vector<Tensor>& in) {
        Tensor input = format == MemoryFormat::ChannelsLast ? channels_last(in[0]) : in[0];
        return relu(training ? batch_norm(input, Tensor(), Tensor(), in[1], in[2], true)
                             : batch_norm(input, running_mean, running_var, in[1], in[2], false));
      };
      Tensor out = fused({x, weight, bias});
      Tensor expected = unfused({x, weight, bias});
      if (format == MemoryFormat::ChannelsLast) CHECK(is_contiguous_in(out, MemoryFormat::ChannelsLast));
      std::vector<double> a = out.to_vector<double>(), e = expected.to_vector<double>();
      int64_t clamped = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i] == Approx(e[i]).margin(1e-12));
        clamped += a[i] == 0.0;
      }
      CHECK(clamped > 0);
      // Gradients against the unfused ops' and against finite differences.
      Tensor grad_output = normal(out.sizes(), 63);
      sum(mul(out, grad_output)).backward();
      std::vector<Tensor> fused_grads = {x.grad(), weight.grad(), bias.grad()};
      for (const Tensor& leaf : {x, weight, bias}) leaf.set_grad(Tensor());
      sum(mul(expected, grad_output)).backward();
      std::vector<Tensor> unfused_grads = {x.grad(), weight.grad(), bias.grad()};
      for (size_t k = 0; k < fused_grads.size(); ++k) {
        std::vector<double> got = fused_grads[k].to_vector<double>(), want = unfused_grads[k].to_vector<double>();
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
      }
      check_gradients(fused, {x.detach().requires_grad_(), weight.detach().requires_grad_(),
                              bias.detach().requires_grad_()});
    }
  }
}

TEST_CASE("batch_norm_relu records one node that saves the bias, and names itself in errors", "[norm]") {
  Tensor x = normal({4, 3}, 70, true), bias = normal({3}, 71, true);
  Tensor out = batch_norm_relu(x, Tensor(), Tensor(), Tensor(), bias, true);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(std::string(out.grad_fn()->name()) == "BatchNormReluBackward");
  CHECK(out.grad_fn()->next_edges().size() == 3);
  CHECK_THROWS_WITH(batch_norm_relu(normal({2, 3}, 72), {}, {}, normal({4}, 73), {}, true),
                    Catch::Contains("batch_norm_relu: expected weight of shape [3]"));
}
