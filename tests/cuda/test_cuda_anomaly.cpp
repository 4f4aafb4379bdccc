// tests/cuda/test_cuda_anomaly.cpp — anomaly mode on a GPU, against the CPU: the error of
// each small model of tests/autograd/test_anomaly.cpp (log and sqrt at 0, a division by
// zero, a log of a negative number, a float16 overflow) is the CPU's with the device's name
// in place of "cpu"; the device reduction finds one NaN or Inf anywhere in a gradient of
// millions of random elements (first, last or a random element; float32, float16,
// bfloat16); finite gradients pass, bit for bit those of a run without the guard.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "memgrad/autograd/anomaly_mode.h"
#include "autograd/anomaly_models.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/factory.h"
#include "memgrad/core/random.h"
#include "memgrad/nn/activation.h"
#include "memgrad/nn/linear.h"
#include "memgrad/nn/sequential.h"

using namespace mg;
using mg_test::anomaly_error;
using mg_test::model_around;

namespace {

const Device kCuda = Device::cuda();

// `text` with every "cpu" turned into the GPU's name.
std::string on_gpu(std::string text) {
  const std::string gpu = kCuda.str();
  for (size_t at = text.find("cpu"); at != std::string::npos; at = text.find("cpu", at + gpu.size())) {
    text.replace(at, 3, gpu);
  }
  return text;
}

struct SmallCase {
  const char* what;
  mg_test::Op op;
  std::vector<float> input;
  DType dtype = DType::Float32;
  bool with_head = false;  // a Linear(4, 1) after the op (the NaN case)
  double seed = 1.0;
};

}  // namespace

TEST_CASE("CUDA anomaly mode names the same node, input, op and module as the CPU", "[cuda][anomaly]") {
  const std::vector<SmallCase> cases = {
      {"log at 0", [](const Tensor& x) { return log(x); }, {1, 0, 2, 3}},
      {"sqrt at 0", [](const Tensor& x) { return sqrt(x); }, {4, 0, 1, 9}},
      {"division by zero", [](const Tensor& x) { return x / (x - 2.0); }, {1, 2, 3, 4}},
      {"log of a negative number", [](const Tensor& x) { return log(x); }, {1, -1, 2, 3}, DType::Float32, true},
      {"float16 overflow", [](const Tensor& x) { return x * x; }, {200, 1, 2, 3}, DType::Float16, false, 512},
  };
  for (const SmallCase& c : cases) {
    INFO(c.what);
    auto run_on = [&](Device device) {
      Generator generator(3);
      mg_test::NamedLayers head;
      if (c.with_head) head.emplace_back("head", std::make_shared<nn::Linear>(4, 1, true, &generator));
      std::shared_ptr<nn::Sequential> model = model_around(c.op, head);
      model->to(c.dtype);
      model->to(device);
      const Tensor input = converted_copy(from_vector<float>(c.input, {1, 4}), c.dtype, device);
      return anomaly_error(*model, input, scalar_tensor(c.seed, {.dtype = c.dtype, .device = device}));
    };
    const std::string cpu_message = run_on(Device::cpu());
    REQUIRE_THAT(cpu_message, Catch::StartsWith("anomaly detected: "));
    CHECK(run_on(kCuda) == on_gpu(cpu_message));
  }
}

TEST_CASE("CUDA anomaly mode finds one NaN or Inf anywhere in millions of elements", "[cuda][anomaly]") {
  constexpr int64_t kElements = 3'000'017;  // many blocks of the reduction, and a ragged end
  Generator generator(11);
  const int64_t random_position = randint(1, kElements - 1, {}, {.dtype = DType::Int64}, &generator).item<int64_t>();
  for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (int64_t position : {int64_t{0}, kElements - 1, random_position}) {
      for (bool nan : {false, true}) {
        INFO(dtype << ", bad element " << position << (nan ? ", NaN" : ", Inf"));
        // Values in [0.5, 1.5); at `position` a pole: sqrt at 0 (Inf), or x * log(x) at -1,
        // whose gradient log(x) + 1 is NaN there.
        std::vector<float> host = (rand({kElements}, {}, &generator) + 0.5).to_vector<float>();
        host[static_cast<size_t>(position)] = nan ? -1.0f : 0.0f;
        const Tensor values = from_vector<float>(host);
        auto error_on = [&](Device device) {
          const Tensor x = converted_copy(values, dtype, device).requires_grad_();
          autograd::DetectAnomalyGuard detect_anomaly;
          const Tensor loss = (nan ? x * log(x) : sqrt(x)).sum();
          return mg_test::error_message([&] { loss.backward(); });
        };
        const std::string cpu_message = error_on(Device::cpu());
        const char* expected = nan ? "anomaly detected: MulBackward returned a gradient with NaN"
                                   : "anomaly detected: SqrtBackward returned a gradient with Inf";
        REQUIRE_THAT(cpu_message, Catch::StartsWith(expected));
        CHECK(error_on(kCuda) == on_gpu(cpu_message));
      }
    }
  }
}

TEST_CASE("CUDA anomaly mode passes finite gradients unchanged", "[cuda][anomaly]") {
  Generator generator(5);
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 128, true, &generator),
                                                std::make_shared<nn::ReLU>(),
                                                std::make_shared<nn::Linear>(128, 10, true, &generator));
  model->to(kCuda);
  const Tensor input = converted_copy(randn({32, 64}, {}, &generator), DType::Float32, kCuda);
  auto gradients = [&](bool anomaly) {
    autograd::DetectAnomalyGuard detect_anomaly(anomaly);
    (*model)(input).sum().backward();
    std::vector<Tensor> grads;
    for (const Tensor& parameter : model->parameters()) grads.push_back(parameter.grad());
    model->zero_grad();
    return grads;
  };
  const std::vector<Tensor> plain = gradients(false);
  const std::vector<Tensor> checked = gradients(true);
  REQUIRE(plain.size() == checked.size());
  for (size_t i = 0; i < plain.size(); ++i) CHECK(mg_test::max_abs_difference(plain[i], checked[i]) == 0.0);
}
