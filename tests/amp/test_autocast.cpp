// tests/amp/test_autocast.cpp — autocast on the CPU in bfloat16 (and float16), through the
// ops: the per-op policy (products in 16 bits, softmax/losses/reductions in float32,
// elementwise promotion), gradients reaching float32 master weights close to a float32
// run, the weight-cast cache and its AUTOCAST_CACHE bytes, and the activation memory
// autocast saves. The guard's state and errors alone: tests/autocast/.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "memgrad/autocast/autocast.h"
#include "amp/autocast_checks.h"
#include "memgrad/memgrad.h"

using namespace mg;
using amp::AutocastGuard;

namespace {

using mg_test::check_close_to_largest;

constexpr DType kLow = DType::BFloat16;

int64_t category_bytes(MemoryCategory category) {
  return memory::snapshot(Device::cpu()).category(category).current;
}

// A float32 leaf that requires grad: what autocast treats as a parameter (tagged as a
// module would, so that saving it never counts as ACTIVATION).
Tensor parameter(const Shape& sizes, Generator& generator, double scale = 0.3) {
  Tensor values = randn(sizes, {.category = MemoryCategory::Parameter}, &generator);
  values.mul_(scale);
  return values.requires_grad_();
}

std::vector<double> values_of(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

}  // namespace

TEST_CASE("under autocast, products run in bfloat16 and softmax, losses and sums in float32", "[autocast]") {
  Generator generator(1);
  Tensor x = randn({4, 8}, {}, &generator);
  Tensor weight = parameter({3, 8}, generator), bias = parameter({3}, generator);
  Tensor image = randn({2, 3, 6, 6}, {}, &generator);
  Tensor kernel = parameter({4, 3, 3, 3}, generator), kernel_bias = parameter({4}, generator);
  Tensor target = from_vector<int64_t>({0, 2, 1, 2});

  AutocastGuard autocast(kLow, DeviceType::CPU);
  Tensor y = linear(x, weight, bias);  // the fused bias path
  CHECK(y.dtype() == kLow);
  CHECK(linear(x, weight).dtype() == kLow);
  CHECK(matmul(x, weight.t()).dtype() == kLow);
  CHECK(conv2d(image, kernel, kernel_bias, {.padding = {1, 1}}).dtype() == kLow);
  CHECK(softmax(y, 1).dtype() == DType::Float32);
  CHECK(log_softmax(y, 1).dtype() == DType::Float32);
  CHECK(cross_entropy(y, target).dtype() == DType::Float32);
  CHECK(nll_loss(log_softmax(y, 1), target).dtype() == DType::Float32);
  CHECK(sum(y).dtype() == DType::Float32);
  CHECK(mean(y, {1}).dtype() == DType::Float32);
  CHECK(relu(y).dtype() == kLow);  // not on either list: runs in its input's dtype
  // Values: the bfloat16 product is the float32 one rounded (inputs to 8 bits of mantissa).
  Tensor reference;
  {
    AutocastGuard off(kLow, DeviceType::CPU, /*enabled=*/false);
    reference = linear(x, weight, bias);
    CHECK(reference.dtype() == DType::Float32);
  }
  check_close_to_largest(y, reference, 0.03);
  // float64 and integer tensors are never cast.
  Tensor x64 = x.to(DType::Float64);
  CHECK(matmul(x64, x64.t()).dtype() == DType::Float64);
  CHECK(softmax(x64, 1).dtype() == DType::Float64);
  CHECK(sum(target).dtype() == DType::Int64);
}

TEST_CASE("autocast for CUDA leaves CPU tensors alone", "[autocast]") {
  Generator generator(2);
  Tensor x = randn({2, 4}, {}, &generator);
  Tensor weight = parameter({3, 4}, generator);
  AutocastGuard cuda_only(DType::Float16, DeviceType::CUDA);
  CHECK(linear(x, weight).dtype() == DType::Float32);
  CHECK(amp::autocast_cache_size() == 0);
}

TEST_CASE("nested guards switch the dtype and disabling inside runs float32", "[autocast]") {
  Generator generator(3);
  Tensor x = randn({2, 4}, {}, &generator);
  Tensor weight = parameter({3, 4}, generator);
  AutocastGuard outer(kLow, DeviceType::CPU);
  CHECK(linear(x, weight).dtype() == kLow);
  {
    AutocastGuard half(DType::Float16, DeviceType::CPU);
    CHECK(linear(x, weight).dtype() == DType::Float16);
    {
      AutocastGuard off(DType::Float16, DeviceType::CPU, /*enabled=*/false);
      Tensor y = linear(x, weight);
      CHECK(y.dtype() == DType::Float32);
      CHECK(softmax(y, 1).dtype() == DType::Float32);
    }
  }
  CHECK(linear(x, weight).dtype() == kLow);
}

TEST_CASE("binary elementwise ops promote to the widest input dtype, with or without autocast", "[autocast]") {
  Generator generator(4);
  Tensor a16 = randn({3, 4}, {.dtype = kLow}, &generator).requires_grad_();
  Tensor b32 = randn({3, 4}, {}, &generator).requires_grad_();
  Tensor h16 = randn({3, 4}, {.dtype = DType::Float16}, &generator);
  for (bool enabled : {false, true}) {
    INFO("autocast " << enabled);
    AutocastGuard autocast(kLow, DeviceType::CPU, enabled);
    CHECK(add(a16, b32).dtype() == DType::Float32);
    CHECK(mul(a16, a16).dtype() == kLow);
    CHECK(sub(a16, h16).dtype() == DType::Float32);  // neither holds the other
    CHECK(mul(a16, 2.0).dtype() == kLow);
  }
  // The gradient of each input comes back in its own dtype.
  sum(mul(a16, b32)).backward();
  CHECK(a16.grad().dtype() == kLow);
  CHECK(b32.grad().dtype() == DType::Float32);
}

TEST_CASE("gradients reach float32 master weights, close to a float32 run", "[autocast]") {
  Generator generator(5);
  Tensor x = randn({16, 12}, {}, &generator);
  Tensor image = randn({4, 2, 6, 6}, {}, &generator);
  Tensor target = randint(0, 5, {16}, {.dtype = DType::Int64}, &generator);
  Tensor image_target = randint(0, 5, {4}, {.dtype = DType::Int64}, &generator);
  Tensor w1 = parameter({20, 12}, generator), b1 = parameter({20}, generator);
  Tensor w2 = parameter({5, 20}, generator), b2 = parameter({5}, generator);
  Tensor kernel = parameter({3, 2, 3, 3}, generator), kernel_bias = parameter({3}, generator);
  Tensor head = parameter({5, 3 * 6 * 6}, generator, 0.1);
  std::vector<Tensor> params{w1, b1, w2, b2, kernel, kernel_bias, head};

  // An MLP and a small CNN; w2 is used twice, so its gradient sums two products.
  auto loss_of = [&]() {
    Tensor hidden = relu(linear(x, w1, b1));
    Tensor logits = add(linear(hidden, w2, b2), matmul(hidden, w2.t()));
    Tensor features = relu(conv2d(image, kernel, kernel_bias, {.padding = {1, 1}})).flatten(1);
    return add(cross_entropy(logits, target), cross_entropy(linear(features, head), image_target));
  };
  auto gradients = [&](bool autocast) {
    for (const Tensor& p : params) p.set_grad(Tensor());
    Tensor loss;
    {
      AutocastGuard guard(kLow, DeviceType::CPU, autocast);
      loss = loss_of();
    }
    CHECK(loss.dtype() == DType::Float32);
    loss.backward();
    std::vector<Tensor> grads;
    for (const Tensor& p : params) grads.push_back(p.grad());
    return grads;
  };
  std::vector<Tensor> reference = gradients(false);
  std::vector<Tensor> mixed = gradients(true);
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(mixed[i].defined());
    CHECK(mixed[i].dtype() == DType::Float32);
    CHECK(params[i].dtype() == DType::Float32);
    check_close_to_largest(mixed[i], reference[i], 0.05);
  }
}

TEST_CASE("the cache casts a weight used twice once, as AUTOCAST_CACHE bytes, and frees it after the guard",
          "[autocast]") {
  Generator generator(6);
  Tensor x = randn({4, 64}, {}, &generator);
  Tensor weight = parameter({64, 64}, generator);
  const int64_t copy_bytes = weight.numel() * 2;  // one bfloat16 copy
  const int64_t before = category_bytes(MemoryCategory::AutocastCache);
  Tensor gradient_of_twice;
  {
    AutocastGuard autocast(kLow, DeviceType::CPU);
    {
      Tensor y = linear(relu(linear(x, weight)), weight);
      CHECK(amp::autocast_cache_size() == 1);
      CHECK(category_bytes(MemoryCategory::AutocastCache) - before == copy_bytes);
      // The cached copy is saved by both products; it stays AUTOCAST_CACHE, not ACTIVATION.
      sum(y).backward();
      gradient_of_twice = weight.grad();
      CHECK(gradient_of_twice.dtype() == DType::Float32);
    }
    // An in-place update (an optimizer step) makes the copy stale: the next use casts again
    // and replaces it.
    {
      NoGradGuard no_grad;
      weight.mul_(0.5);
    }
    Tensor y = linear(x, weight);
    CHECK(amp::autocast_cache_size() == 1);
    CHECK(category_bytes(MemoryCategory::AutocastCache) - before == copy_bytes);
    // Activations are never cached: only float32 leaves that require grad are.
    Tensor activation = randn({64, 64}, {}, &generator);
    CHECK(linear(x, activation).dtype() == kLow);
    CHECK(amp::autocast_cache_size() == 1);
  }
  CHECK(amp::autocast_cache_size() == 0);
  CHECK(category_bytes(MemoryCategory::AutocastCache) == before);

  // The gradient through the twice-used cached copy is the float32 one (bfloat16 loosely).
  weight.set_grad(Tensor());
  {
    NoGradGuard no_grad;
    weight.mul_(2.0);  // back to the values the autocast run used
  }
  sum(linear(relu(linear(x, weight)), weight)).backward();
  check_close_to_largest(gradient_of_twice, weight.grad(), 0.05);
}

TEST_CASE("autocast's copies of channels_last weights and images stay channels_last", "[autocast][memory_format]") {
  Generator generator(8);
  Tensor image = randn({2, 3, 6, 6}, {}, &generator).contiguous(MemoryFormat::ChannelsLast);
  Tensor kernel = parameter({4, 3, 3, 3}, generator);
  {
    NoGradGuard no_grad;
    kernel.set_data(kernel.contiguous(MemoryFormat::ChannelsLast));
  }
  AutocastGuard autocast(kLow, DeviceType::CPU);
  Tensor cast_image = amp::cast_to_autocast_dtype(image);
  Tensor cast_kernel = amp::cast_to_autocast_dtype(kernel);
  CHECK(cast_image.dtype() == kLow);
  CHECK(cast_image.strides() == image.strides());
  CHECK(cast_kernel.strides() == kernel.strides());
  // So the convolution sees one layout throughout and answers in it.
  Tensor output = conv2d(image, kernel, Tensor(), {.padding = {1, 1}});
  CHECK(output.dtype() == kLow);
  CHECK(suggest_memory_format(output) == MemoryFormat::ChannelsLast);
}

TEST_CASE("a copy cast under no_grad is not reused by a forward that records a graph", "[autocast]") {
  Generator generator(7);
  Tensor x = randn({2, 8}, {}, &generator);
  Tensor weight = parameter({4, 8}, generator);
  AutocastGuard autocast(kLow, DeviceType::CPU);
  {
    NoGradGuard no_grad;
    CHECK_FALSE(linear(x, weight).requires_grad());
  }
  Tensor y = linear(x, weight);
  REQUIRE(y.requires_grad());
  sum(y).backward();
  CHECK(weight.grad().defined());
}

namespace {

// ACTIVATION bytes that `forward` leaves saved for backward, measured while its graph lives.
int64_t activation_bytes_of(const std::function<Tensor()>& forward, bool autocast) {
  const int64_t before = category_bytes(MemoryCategory::Activation);
  AutocastGuard guard(kLow, DeviceType::CPU, autocast);
  Tensor loss = forward();
  return category_bytes(MemoryCategory::Activation) - before;
}

}  // namespace

TEST_CASE("autocast cross_entropy reads 16-bit logits as they are: float32 loss, no float32 copy saved",
          "[autocast][memory]") {
  Generator generator(21);
  const int64_t batch = 6, classes = 300;
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    INFO(dtype);
    Tensor logits = to(mul(randn({batch, classes}, {}, &generator), 3.0), dtype).requires_grad_();
    Tensor target = from_vector<int64_t>({0, 299, -100, 7, 150, 7});
    CrossEntropyOptions options{.label_smoothing = 0.1};
    // The reference: PyTorch's rule, the logits cast to float32 first (exact) and the
    // loss's gradient rounded back to the logits' dtype.
    Tensor exact = to(logits.detach(), DType::Float32).requires_grad_();
    Tensor expected = cross_entropy(exact, target, options);
    expected.backward();

    auto activation = [] { return memory::snapshot(Device::cpu()).category(MemoryCategory::Activation).current; };
    const int64_t before = activation();
    Tensor loss;
    {
      AutocastGuard autocast(dtype, DeviceType::CPU);
      loss = cross_entropy(logits, target, options);
    }
    // Saved: the 16-bit logits, the targets, one float per row and the mean's count.
    CHECK(activation() - before == batch * classes * 2 + batch * 8 + batch * 4 + 4);
    CHECK(loss.dtype() == DType::Float32);
    CHECK(loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-6));
    loss.backward();
    CHECK(logits.grad().dtype() == dtype);
    CHECK(to(logits.grad(), DType::Float32).to_vector<float>() == to(exact.grad(), dtype).to(DType::Float32)
                                                                       .to_vector<float>());
  }
}

TEST_CASE("bfloat16 autocast saves about half the activation bytes of float32", "[autocast][memory]") {
  Generator generator(8);
  // MLP 512-1024-1024-10, batch 64.
  Tensor x = randn({64, 512}, {}, &generator);
  Tensor target = randint(0, 10, {64}, {.dtype = DType::Int64}, &generator);
  Tensor w1 = parameter({1024, 512}, generator, 0.05), b1 = parameter({1024}, generator);
  Tensor w2 = parameter({1024, 1024}, generator, 0.05), b2 = parameter({1024}, generator);
  Tensor w3 = parameter({10, 1024}, generator, 0.05), b3 = parameter({10}, generator);
  auto mlp = [&]() {
    Tensor h = relu(linear(x, w1, b1));
    h = relu(linear(h, w2, b2));
    return cross_entropy(linear(h, w3, b3), target);
  };
  // CNN: two 3x3 convolutions (3 -> 16 -> 32 channels) on 32x32 images, batch 8, and a
  // linear head.
  Tensor images = randn({8, 3, 32, 32}, {}, &generator);
  Tensor image_target = randint(0, 10, {8}, {.dtype = DType::Int64}, &generator);
  Tensor k1 = parameter({16, 3, 3, 3}, generator, 0.2), c1 = parameter({16}, generator);
  Tensor k2 = parameter({32, 16, 3, 3}, generator, 0.1), c2 = parameter({32}, generator);
  Tensor head = parameter({10, 32 * 32 * 32}, generator, 0.01);
  auto cnn = [&]() {
    Tensor h = relu(conv2d(images, k1, c1, {.padding = {1, 1}}));
    h = relu(conv2d(h, k2, c2, {.padding = {1, 1}}));
    return cross_entropy(linear(h.flatten(1), head), image_target);
  };

  for (auto [name, forward] : {std::pair<const char*, std::function<Tensor()>>{"MLP", mlp}, {"CNN", cnn}}) {
    int64_t float32_bytes = activation_bytes_of(forward, false);
    int64_t bfloat16_bytes = activation_bytes_of(forward, true);
    double ratio = static_cast<double>(bfloat16_bytes) / static_cast<double>(float32_bytes);
    std::printf("%s forward ACTIVATION bytes: float32 %lld, bfloat16 autocast %lld, ratio %.3f\n", name,
                static_cast<long long>(float32_bytes), static_cast<long long>(bfloat16_bytes), ratio);
    INFO(name << ": float32 " << float32_bytes << " bytes, bfloat16 autocast " << bfloat16_bytes << " bytes");
    CHECK(float32_bytes > 0);
    // Half: cross_entropy saves the 16-bit logits themselves.
    CHECK(ratio >= 0.45);
    CHECK(ratio <= 0.6);
  }
}

TEST_CASE("backward inside an autocast region does not autocast the gradient formulas", "[autocast]") {
  Generator generator(9);
  Tensor x = randn({6, 8}, {}, &generator);
  Tensor weight = parameter({5, 8}, generator), bias = parameter({5}, generator);
  Tensor inside, outside;
  for (Tensor* grad : {&inside, &outside}) {
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    Tensor loss;
    {
      AutocastGuard autocast(kLow, DeviceType::CPU);
      // The bias's gradient is a sum of a bfloat16 gradient; under autocast a sum would
      // give float32, where the bfloat16 cast copy expects bfloat16.
      loss = sum(relu(linear(x, weight, bias)));
      if (grad == &inside) loss.backward();
    }
    if (grad == &outside) loss.backward();
    *grad = bias.grad();
  }
  CHECK(inside.dtype() == DType::Float32);
  check_close_to_largest(inside, outside, 0.0);
}

TEST_CASE("checkpoint recomputes under the autocast state of its forward", "[autocast][checkpoint]") {
  Generator generator(10);
  Tensor x = randn({6, 8}, {}, &generator).requires_grad_();
  Tensor weight = parameter({8, 8}, generator);
  auto block = [&](const Tensor& input) { return relu(linear(input, weight)); };
  Tensor expected_grad, checkpointed_grad;
  for (bool checkpointed : {false, true}) {
    weight.set_grad(Tensor());
    Tensor loss;
    {
      AutocastGuard autocast(kLow, DeviceType::CPU);
      Tensor hidden = checkpointed ? checkpoint(block, x) : block(x);
      CHECK(hidden.dtype() == kLow);
      loss = sum(hidden);
    }
    // Outside the region: the recompute must still run in bfloat16, or its outputs would
    // not match the forward's.
    loss.backward();
    (checkpointed ? checkpointed_grad : expected_grad) = weight.grad();
  }
  REQUIRE(checkpointed_grad.defined());
  CHECK(checkpointed_grad.dtype() == DType::Float32);
  check_close_to_largest(checkpointed_grad, expected_grad, 0.0);
}

TEST_CASE("a parameter given new data through set_data is cast again", "[autocast]") {
  Generator generator(11);
  Tensor x = randn({2, 4}, {}, &generator);
  Tensor weight = parameter({3, 4}, generator);
  AutocastGuard autocast(kLow, DeviceType::CPU);
  CHECK(values_of(linear(x, weight)) != std::vector<double>(6, 0.0));
  weight.set_data(zeros({3, 4}));  // a new storage, at version 0 like the old one
  CHECK(values_of(linear(x, weight)) == std::vector<double>(6, 0.0));
}

TEST_CASE("a small CNN with batch norm trains under bfloat16 autocast", "[autocast][train]") {
  // Separable data: the class is which quadrant of an 8x8 image holds a bright square.
  Generator generator(12);
  constexpr int64_t kBatch = 32;
  Tensor images = randn({kBatch, 1, 8, 8}, {}, &generator);
  images.mul_(0.1);
  std::vector<int64_t> labels(kBatch);
  {
    std::vector<float> pixels = images.to_vector<float>();
    for (int64_t n = 0; n < kBatch; ++n) {
      labels[n] = n % 4;
      int64_t top = labels[n] / 2 * 4, left = labels[n] % 2 * 4;
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 4; ++c) pixels[n * 64 + (top + r) * 8 + left + c] += 1.0f;
    }
    images = from_vector(pixels, {kBatch, 1, 8, 8});
  }
  Tensor target = from_vector(labels);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 8, 3, Conv2dOptions{.padding = {1, 1}}), std::make_shared<nn::BatchNorm2d>(8),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(8 * 64, 4)});
  optim::Adam optimizer(model->parameters(), {.lr = 1e-2});

  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kLow, DeviceType::CPU);
      loss = cross_entropy((*model)(images), target);
    }
    loss.backward();
    optimizer.step();
    (step == 0 ? first_loss : last_loss) = loss.item();
  }
  for (const Tensor& p : model->parameters()) CHECK(p.dtype() == DType::Float32);
  INFO("loss " << first_loss << " -> " << last_loss);
  CHECK(last_loss < 0.2 * first_loss);
}
