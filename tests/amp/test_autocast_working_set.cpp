// tests/amp/test_autocast_working_set.cpp — autocast's working sets on the CPU: a region
// that begins with the parameter the last one began with casts every parameter that region
// used at its first miss, in one batch, with the values, bytes and gradients of casts made
// one at a time; what is cast ahead is only what is still valid (alive, the same bytes, the
// same history); and the set follows what each region used. The cache alone:
// tests/autocast/.
#include <catch2/catch.hpp>

#include <memory>
#include <utility>
#include <vector>

#include "amp/working_set_checks.h"
#include "memgrad/autocast/autocast.h"
#include "memgrad/memgrad.h"

using namespace mg;
using amp::AutocastGuard;
using mg_test::make_working_set_batch;
using mg_test::make_working_set_model;
using mg_test::working_set_step;

namespace {

constexpr DType kLow = DType::BFloat16;

int64_t cache_bytes() { return memory::snapshot(Device::cpu()).category(MemoryCategory::AutocastCache).current; }

}  // namespace

TEST_CASE("a second region casts its working set at its first miss, as casts one at a time would",
          "[autocast][working_set]") {
  mg_test::check_working_set_steps(1, Device::cpu(), kLow);
}

TEST_CASE("a region that begins with another parameter does not cast the other region's set",
          "[autocast][working_set]") {
  const mg_test::WorkingSetModel model = make_working_set_model(2, Device::cpu());
  const mg_test::WorkingSetModel other = make_working_set_model(3, Device::cpu());
  const mg_test::WorkingSetBatch batch = make_working_set_batch(4, Device::cpu());
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 2);
  CHECK(working_set_step(other, batch, kLow).after_first_op.casts == 2);  // model's set begins with model.w1
  // The same parameters in another order: the convolution first.
  {
    AutocastGuard autocast(kLow, DeviceType::CPU);
    Tensor features = conv2d(batch.image, model.kernel, model.kernel_bias, {.padding = {1, 1}});
    CHECK(amp::autocast_cache_size() == 2);
    Tensor hidden = linear(batch.x, model.w1, model.b1);
    CHECK(amp::autocast_cache_size() == 4);
  }
  // Each set is kept under its own first parameter.
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 7);
  CHECK(working_set_step(other, batch, kLow).after_first_op.casts == 7);
  {
    AutocastGuard autocast(kLow, DeviceType::CPU);
    Tensor features = conv2d(batch.image, model.kernel, model.kernel_bias, {.padding = {1, 1}});
    CHECK(amp::autocast_cache_size() == 4);
  }
}

TEST_CASE("a parameter freed or given new bytes between regions is not cast ahead", "[autocast][working_set]") {
  Generator generator(5);
  const Tensor x = randn({4, 8}, {}, &generator);
  std::vector<Tensor> weights;
  for (int i = 0; i < 4; ++i) weights.push_back(mg_test::working_set_parameter({8, 8}, generator, Device::cpu()));
  // Casts after the first op and at the forward's end.
  auto forward = [&](const std::vector<Tensor>& used) {
    AutocastGuard autocast(kLow, DeviceType::CPU);
    Tensor hidden = linear(x, used[0]);
    const size_t after_first_op = amp::autocast_cache_size();
    for (size_t i = 1; i < used.size(); ++i) hidden = linear(relu(hidden), used[i]);
    CHECK(hidden.dtype() == kLow);
    return std::pair{after_first_op, amp::autocast_cache_size()};
  };
  CHECK(forward(weights) == std::pair<size_t, size_t>{1, 4});
  CHECK(forward(weights) == std::pair<size_t, size_t>{4, 4});

  const std::weak_ptr<TensorImpl> freed = weights[1].impl_ptr();
  weights.erase(weights.begin() + 1);
  REQUIRE(freed.expired());  // the working set held it weakly
  weights[1].set_data(randn({8, 8}, {}, &generator));  // was weights[2]: new bytes
  // weights[0] and weights[2] are cast ahead; the one with new bytes is cast when used.
  const int64_t bytes_before = cache_bytes();
  CHECK(forward(weights) == std::pair<size_t, size_t>{2, 3});
  CHECK(cache_bytes() == bytes_before);
  CHECK(forward(weights) == std::pair<size_t, size_t>{3, 3});
}

TEST_CASE("copies cast with history are not cast ahead for a region under no_grad, nor the reverse",
          "[autocast][working_set]") {
  const mg_test::WorkingSetModel model = make_working_set_model(6, Device::cpu());
  const mg_test::WorkingSetBatch batch = make_working_set_batch(7, Device::cpu());
  working_set_step(model, batch, kLow);
  {
    NoGradGuard no_grad;
    AutocastGuard autocast(kLow, DeviceType::CPU);
    Tensor hidden = linear(batch.x, model.w1, model.b1);
    CHECK(amp::autocast_cache_size() == 2);
    CHECK_FALSE(hidden.requires_grad());
    hidden = linear(relu(hidden), model.w2, model.b2);
    CHECK_FALSE(hidden.requires_grad());
  }
  // The set is now the no_grad region's: a step that records a graph casts alone, and its
  // gradients reach every parameter; the step after it casts its set ahead again.
  const mg_test::WorkingSetStep recording = working_set_step(model, batch, kLow);
  CHECK(recording.after_first_op.casts == 2);
  CHECK(recording.every_gradient_defined);
  const mg_test::WorkingSetStep next = working_set_step(model, batch, kLow);
  CHECK(next.after_first_op.casts == 7);
  CHECK(next.every_gradient_defined);
}

TEST_CASE("the working set becomes what the region used: fewer parameters, then all again",
          "[autocast][working_set]") {
  const mg_test::WorkingSetModel model = make_working_set_model(8, Device::cpu());
  const mg_test::WorkingSetBatch batch = make_working_set_batch(9, Device::cpu());
  const int64_t bytes_before = cache_bytes();
  auto first_layer_only = [&] {
    AutocastGuard autocast(kLow, DeviceType::CPU);
    Tensor hidden = linear(batch.x, model.w1, model.b1);
    return amp::autocast_cache_size();
  };
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 2);  // learns the whole model
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 7);
  CHECK(first_layer_only() == 7);  // the whole model's set, cast ahead; five copies go unused
  CHECK(cache_bytes() == bytes_before);  // and are freed with the region
  CHECK(first_layer_only() == 2);  // relearned: the first layer alone
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 2);
  CHECK(working_set_step(model, batch, kLow).after_first_op.casts == 7);
}

TEST_CASE("backward's recomputes cast their parameters a segment at a time, never a working set ahead",
          "[autocast][working_set][checkpoint]") {
  Generator generator(10);
  // An input with history (a float32 leaf requiring grad would count as a parameter).
  const Tensor x = mul(randn({4, 8}, {}, &generator).requires_grad_(), 2.0);
  const Tensor w1 = mg_test::working_set_parameter({8, 8}, generator, Device::cpu());
  const Tensor w2 = mg_test::working_set_parameter({8, 8}, generator, Device::cpu());
  // The cache's size after each segment's product: in the forward (under no_grad), then in
  // backward's recomputes (the last segment first).
  std::vector<size_t> seen;
  auto segment = [&](const Tensor& weight) {
    return [&, weight](const Tensor& input) {
      Tensor output = relu(linear(input, weight));
      seen.push_back(amp::autocast_cache_size());
      return output;
    };
  };
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    seen.clear();
    Tensor loss;
    {
      AutocastGuard autocast(kLow, DeviceType::CPU);
      loss = sum(checkpoint(segment(w2), checkpoint(segment(w1), x)));
    }
    loss.backward();
    // The second forward casts both weights at its first miss; backward never does. (The
    // first segment's recompute also caches its input, which checkpoint hands it detached:
    // a float32 leaf requiring grad, as PyTorch's cache would.)
    const std::vector<size_t> expected = step == 0 ? std::vector<size_t>{1, 2, 1, 3} : std::vector<size_t>{2, 2, 1, 3};
    CHECK(seen == expected);
    CHECK(w1.grad().defined());
    CHECK(w2.grad().defined());
  }
}
