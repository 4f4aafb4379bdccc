// tests/autograd/test_saved_tensor_hooks.cpp — saved-tensor hooks: pack and unpack are
// called once per saved tensor (and per read), gradients are unchanged by hooks that give
// the values back, a packed tensor is what counts as ACTIVATION, guards nest and are off
// inside the hooks, errors name the op, in-place changes are still caught; and SaveOnCpu
// leaves CPU tensors alone. (SaveOnCpu on a GPU: tests/cuda/test_cuda_save_on_cpu.cpp.)
#include <catch2/catch.hpp>

#include <any>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/save_on_cpu.h"
#include "memgrad/autograd/saved_tensor_hooks.h"
#include "memgrad/autograd/softmax.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"
#include "memgrad/memory/simulated_target.h"
#include "memgrad/memory/snapshot.h"
#include "memgrad/memory/step_cost.h"

using namespace mg;
using mg::autograd::current_saved_tensor_hooks;
using mg::autograd::DisableSavedTensorHooks;
using mg::autograd::SavedTensorHooks;

namespace {

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

struct Leaves {
  Tensor x, w1, w2;
};

Leaves make_leaves(DType dtype, uint64_t seed) {
  Generator generator(seed);
  auto leaf = [&](const Shape& sizes) {
    return converted_copy(randn(sizes, {}, &generator), dtype, Device::cpu()).requires_grad_();
  };
  return {leaf({6, 5}), leaf({5, 4}), leaf({4, 3})};
}

// Saves 8 tensors: matmul both operands (twice), sigmoid and log_softmax their outputs,
// and mul the same tensor as both operands.
Tensor small_net(const Leaves& leaves) {
  Tensor hidden = sigmoid(matmul(leaves.x, leaves.w1));
  return log_softmax(matmul(hidden * hidden, leaves.w2), 1).sum();
}
constexpr int kSmallNetSaves = 8;

std::vector<std::vector<double>> grads_of(const Leaves& leaves) {
  std::vector<std::vector<double>> grads;
  for (const Tensor& leaf : {leaves.x, leaves.w1, leaves.w2}) {
    REQUIRE(leaf.grad().defined());
    grads.push_back(converted_copy(leaf.grad(), DType::Float64, Device::cpu()).to_vector<double>());
  }
  return grads;
}

// Gradients of small_net over fresh leaves, without hooks.
std::vector<std::vector<double>> plain_grads(DType dtype, uint64_t seed) {
  Leaves leaves = make_leaves(dtype, seed);
  small_net(leaves).backward();
  return grads_of(leaves);
}

struct Counts {
  int packs = 0;
  int unpacks = 0;
};

// Hooks that keep the tensor itself and count their calls in `counts`, which must outlive
// the graph (unpack runs in backward, after the guard has ended).
SavedTensorHooks counting_hooks(Counts& counts) {
  return SavedTensorHooks(
      [&counts](const Tensor& saved) -> std::any {
        ++counts.packs;
        return saved;
      },
      [&counts](const std::any& packed) {
        ++counts.unpacks;
        return std::any_cast<Tensor>(packed);
      });
}

std::any pack_clone(const Tensor& saved) { return contiguous_copy(saved); }
Tensor unpack_tensor(const std::any& packed) { return std::any_cast<Tensor>(packed); }

}  // namespace

TEST_CASE("pack runs once per saved tensor at save time, unpack once per read in backward", "[saved_hooks]") {
  Leaves leaves = make_leaves(DType::Float64, 1);
  Counts counts;
  Tensor loss;
  {
    SavedTensorHooks hooks = counting_hooks(counts);
    CHECK(current_saved_tensor_hooks() != nullptr);
    loss = small_net(leaves);
  }
  CHECK(current_saved_tensor_hooks() == nullptr);
  CHECK(counts.packs == kSmallNetSaves);
  CHECK(counts.unpacks == 0);
  Tensor unhooked = sigmoid(leaves.x);  // saved plainly: the guard is gone
  CHECK(counts.packs == kSmallNetSaves);

  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK(counts.unpacks == kSmallNetSaves);
  loss.backward();  // a retained graph unpacks again
  CHECK(counts.unpacks == 2 * kSmallNetSaves);
  CHECK(counts.packs == kSmallNetSaves);
  // A released graph still says so, with hooks as without.
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("second time") && Catch::Contains("retain_graph=true"));
}

TEST_CASE("hooks that pack a copy and unpack it leave gradients unchanged", "[saved_hooks]") {
  Leaves leaves = make_leaves(DType::Float64, 2);
  Tensor loss;
  {
    SavedTensorHooks hooks(pack_clone, unpack_tensor);
    loss = small_net(leaves);
  }
  loss.backward();
  CHECK(grads_of(leaves) == plain_grads(DType::Float64, 2));
}

TEST_CASE("hooks can hold float32 saved tensors in float64 and give back float32", "[saved_hooks]") {
  std::vector<DType> packed_dtypes;
  SavedTensorHooks as_double(
      [&](const Tensor& saved) -> std::any {
        packed_dtypes.push_back(saved.dtype());
        return converted_copy(saved, DType::Float64, saved.device());
      },
      [](const std::any& packed) {
        const Tensor& as_float64 = std::any_cast<const Tensor&>(packed);
        CHECK(as_float64.dtype() == DType::Float64);
        return converted_copy(as_float64, DType::Float32, as_float64.device());
      });
  Leaves leaves = make_leaves(DType::Float32, 3);
  small_net(leaves).backward();
  CHECK(packed_dtypes == std::vector<DType>(kSmallNetSaves, DType::Float32));
  // float32 -> float64 -> float32 is exact, so the gradients are the very same.
  CHECK(grads_of(leaves) == plain_grads(DType::Float32, 3));
}

TEST_CASE("a packed tensor is the ACTIVATION memory and the original's bytes are not held", "[saved_hooks]") {
  int64_t before = category_bytes(MemoryCategory::Activation);
  Generator generator(4);
  Tensor x = randn({64, 32}, {}, &generator).set_memory_category(MemoryCategory::Input);
  Tensor w = randn({32, 16}, {.requires_grad = true}, &generator).set_memory_category(MemoryCategory::Parameter);
  std::vector<std::weak_ptr<Storage>> originals;
  Tensor loss;
  {
    SavedTensorHooks as_double(
        [&](const Tensor& saved) -> std::any {
          originals.push_back(saved.storage());
          return converted_copy(saved, DType::Float64, saved.device());
        },
        [](const std::any& packed) {
          return converted_copy(std::any_cast<Tensor>(packed), DType::Float32, Device::cpu());
        });
    loss = sigmoid(matmul(x, w)).sum();
  }
  // matmul saves x (w's gradient needs it) and sigmoid its (64, 16) output, both as
  // float64 copies. The copy of the INPUT is ACTIVATION too: it exists only for the graph.
  CHECK(category_bytes(MemoryCategory::Activation) - before == (64 * 32 + 64 * 16) * 8);
  REQUIRE(originals.size() == 2);
  CHECK_FALSE(originals[0].expired());  // x: the test holds it
  CHECK(originals[1].expired());        // sigmoid's float32 output: nobody does
  loss.backward();
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  REQUIRE(w.grad().defined());
}

TEST_CASE("hooks nest, the innermost packs, and each tensor is unpacked by its packer", "[saved_hooks]") {
  Tensor x = make_leaves(DType::Float64, 5).x;
  Counts outer_counts, inner_counts, innermost_counts;
  Tensor out;
  {
    SavedTensorHooks outer = counting_hooks(outer_counts);
    Tensor a = sigmoid(x);  // outer
    Tensor c;
    {
      SavedTensorHooks inner = counting_hooks(inner_counts);
      Tensor b = sigmoid(a);  // inner
      {
        DisableSavedTensorHooks off;
        CHECK(current_saved_tensor_hooks() == nullptr);
        c = sigmoid(b);  // plain
        SavedTensorHooks innermost = counting_hooks(innermost_counts);
        c = sigmoid(c);  // innermost: a guard inside a disabled scope is on again
      }
    }
    out = sigmoid(c);  // outer again
  }
  CHECK(outer_counts.packs == 2);
  CHECK(inner_counts.packs == 1);
  CHECK(innermost_counts.packs == 1);
  out.sum().backward();  // every guard has ended by now
  CHECK(outer_counts.unpacks == 2);
  CHECK(inner_counts.unpacks == 1);
  CHECK(innermost_counts.unpacks == 1);
}

TEST_CASE("inside pack and unpack no hooks are active, so ops there save plainly", "[saved_hooks]") {
  Tensor x = make_leaves(DType::Float64, 6).x;
  Tensor side_input = make_leaves(DType::Float64, 7).w1;
  std::vector<Tensor> side_outputs;  // graphs recorded inside the hooks
  int packs = 0, unpacks = 0;
  Tensor loss;
  {
    SavedTensorHooks hooks(
        [&](const Tensor& saved) -> std::any {
          ++packs;
          CHECK(current_saved_tensor_hooks() == nullptr);
          side_outputs.push_back(sigmoid(side_input));  // saves its output, plainly
          return saved;
        },
        [&](const std::any& packed) {
          ++unpacks;
          CHECK(current_saved_tensor_hooks() == nullptr);
          return std::any_cast<Tensor>(packed);
        });
    loss = (sigmoid(x) * 3.0).sum();
    CHECK(packs == 1);  // not re-entered by the sigmoid inside pack
    REQUIRE(side_outputs.size() == 1);
    CHECK(side_outputs[0].grad_fn());
    loss.backward();  // unpack runs while the guard is still alive
  }
  CHECK(unpacks == 1);
  side_outputs[0].sum().backward();  // the graph made inside pack works, without hooks
  CHECK(unpacks == 1);
  CHECK(side_input.grad().defined());
}

TEST_CASE("hook errors name the op and an unpack result must match the saved tensor", "[saved_hooks]") {
  CHECK_THROWS_WITH(SavedTensorHooks(pack_clone, nullptr), Catch::Contains("unpack") && Catch::Contains("empty"));
  Tensor x = make_leaves(DType::Float64, 8).x;
  auto loss_with = [&](autograd::UnpackHook unpack) {
    SavedTensorHooks hooks(pack_clone, std::move(unpack));
    return sigmoid(x).sum();
  };

  Tensor lost = loss_with([](const std::any&) -> Tensor { throw std::runtime_error("the offload file is gone"); });
  CHECK_THROWS_MATCHES(lost.backward(), Error,
                       Catch::Matchers::Predicate<Error>([](const Error& error) {
                         std::string message = error.what();
                         return message.find("SigmoidBackward") != std::string::npos &&
                                message.find("the offload file is gone") != std::string::npos;
                       }, "an mg::Error naming the op and the hook's message"));

  Tensor mistyped = loss_with([](const std::any& packed) { return *std::any_cast<const Tensor*>(packed); });
  CHECK_THROWS_WITH(mistyped.backward(), Catch::Contains("SigmoidBackward") && Catch::Contains("std::any_cast"));

  Tensor wrong_dtype = loss_with([](const std::any& packed) {
    return converted_copy(std::any_cast<Tensor>(packed), DType::Float32, Device::cpu());
  });
  CHECK_THROWS_WITH(wrong_dtype.backward(), Catch::Contains("SigmoidBackward") && Catch::Contains("float64") &&
                                                Catch::Contains("float32") && Catch::Contains("[6, 5]"));

  Tensor undefined = loss_with([](const std::any&) { return Tensor(); });
  CHECK_THROWS_WITH(undefined.backward(), Catch::Contains("undefined tensor"));

  // A failing pack fails the op that saves, and leaves the hook stack as it was.
  SavedTensorHooks failing([](const Tensor&) -> std::any { throw Error("no room to pack"); }, unpack_tensor);
  const auto* installed = current_saved_tensor_hooks().get();
  CHECK_THROWS_WITH(sigmoid(x), Catch::Contains("no room to pack"));
  CHECK(current_saved_tensor_hooks().get() == installed);
}

TEST_CASE("an in-place change after saving is still caught under hooks", "[saved_hooks]") {
  Tensor a = make_leaves(DType::Float64, 9).x.detach();  // needs no grad: may change in place
  Tensor w = make_leaves(DType::Float64, 10).x;
  Tensor loss;
  {
    SavedTensorHooks hooks(pack_clone, unpack_tensor);
    loss = (a * w).sum();  // MulBackward saves a (w's gradient needs it), as a copy
  }
  a.mul_(2.0);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("MulBackward") && Catch::Contains("modified by an in-place") &&
                                         Catch::Contains("version 0") && Catch::Contains("version 1"));
}

TEST_CASE("a packed copy whose original is gone unpacks the values at save time", "[saved_hooks]") {
  // The documented limit of the check under hooks (autograd/saved_tensor.cpp): the graph
  // holds the original only weakly. Once nothing holds it, nothing can alias it either, so
  // the copy still has the values backward needs.
  Tensor x = make_leaves(DType::Float64, 11).x;
  Tensor y, loss;
  {
    SavedTensorHooks hooks(pack_clone, unpack_tensor);
    y = x.exp();  // ExpBackward saves its output y, as a copy
  }
  loss = y.sum();
  std::vector<double> expected = y.detach().to_vector<double>();  // d(sum exp x)/dx = exp x
  {
    NoGradGuard no_grad;
    y.mul_(0.0);
  }
  y = Tensor();
  loss.backward();
  CHECK(x.grad().to_vector<double>() == expected);
}

TEST_CASE("SaveOnCpu leaves CPU tensors where they are", "[saved_hooks]") {
  int64_t before = category_bytes(MemoryCategory::Activation);
  Leaves leaves = make_leaves(DType::Float32, 12);
  Tensor loss = small_net(leaves);
  int64_t plain_activation = category_bytes(MemoryCategory::Activation) - before;
  loss = Tensor();
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  {
    autograd::SaveOnCpu offload;
    loss = small_net(leaves);
  }
  // Passed through as themselves: the same bytes count as ACTIVATION, once each.
  CHECK(category_bytes(MemoryCategory::Activation) - before == plain_activation);
  loss.backward();
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  CHECK(grads_of(leaves) == plain_grads(DType::Float32, 12));
}

TEST_CASE("in a prediction for a GPU, SaveOnCpu moves the saved activations to the simulated host and costs "
          "both transfers",
          "[saved_hooks][simulated]") {
  const Device device = Device::simulated(5);
  const mg::SimulatedTarget gpu(Device::cuda(), device, size_t{1} << 30);
  const Device host = mg::simulated_host_of(device);
  REQUIRE(host != device);
  const TensorOptions on_device{.device = device, .category = MemoryCategory::Parameter};
  const Leaves leaves{mg::empty({64, 32}, on_device).requires_grad_(), mg::empty({32, 16}, on_device).requires_grad_(),
                      mg::empty({16, 8}, on_device).requires_grad_()};
  struct Step {
    int64_t device_activation, host_activation;
    double bytes;
  };
  auto step = [&](bool offload) {
    mg::memory::reset_peak_stats(device);
    mg::memory::reset_peak_stats(host);
    mg::memory::StepCostMeter meter(mg::memory::DeviceRates::h100());
    Tensor loss;
    {
      std::optional<autograd::SaveOnCpu> save_on_cpu;
      if (offload) save_on_cpu.emplace();
      loss = small_net(leaves);
    }
    loss.backward();
    for (const Tensor& leaf : {leaves.x, leaves.w1, leaves.w2}) leaf.set_grad(Tensor());
    return Step{mg::memory::snapshot(device).category(MemoryCategory::Activation).peak,
                mg::memory::snapshot(host).category(MemoryCategory::Activation).peak, meter.cost().bytes};
  };
  const Step plain = step(false), offloaded = step(true);
  INFO("ACTIVATION peak: " << plain.device_activation << " B on the device plain, " << offloaded.device_activation
                           << " B on the device and " << offloaded.host_activation << " B on the host offloaded");
  // Every saved intermediate moves (the leaves are parameters, saved where they are); the
  // one saved twice (hidden * hidden) is copied twice, as PyTorch's save_on_cpu copies it.
  CHECK(plain.device_activation > 0);
  CHECK(plain.host_activation == 0);
  CHECK(offloaded.device_activation == 0);
  CHECK(offloaded.host_activation >= plain.device_activation);
  // Each offloaded byte crosses twice, and the step's cost counts both crossings.
  CHECK(offloaded.bytes >= plain.bytes + 2 * static_cast<double>(offloaded.host_activation));
}
