// tests/autograd/test_engine.cpp — the backward engine: ordering, accumulation, release of
// saved tensors, retain_graph, hooks, grad mode, and what each costs in memory.
#include <catch2/catch.hpp>

#include "memgrad/autograd/copy.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/function.h"
#include "memgrad/autograd/grad_mode.h"
#include "memgrad/autograd/matmul.h"
#include "memgrad/autograd/reduce.h"
#include "memgrad/autograd/unary.h"
#include "memgrad/core/allocator/registry.h"
#include "memgrad/core/factory.h"

using namespace mg;

namespace {

int64_t category_bytes(MemoryCategory category) {
  return allocator_for(Device::cpu()).stats().category(category).current;
}

Tensor leaf(const Shape& sizes, uint64_t seed) {
  Generator generator(seed);
  return randn(sizes, {.dtype = DType::Float64, .requires_grad = true}, &generator);
}

}  // namespace

TEST_CASE("gradients accumulate over fan-in and across backward calls", "[engine]") {
  Tensor x = from_vector<double>({1.0, 2.0, 3.0});
  x.requires_grad_();
  Tensor y = x * x + x;  // dy/dx = 2x + 1
  y.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 5.0, 7.0});
  (x * 2.0).sum().backward();  // accumulates into the same .grad
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5.0, 7.0, 9.0});
  CHECK(x.grad().memory_category() == MemoryCategory::Gradient);
}

TEST_CASE("ACTIVATION bytes are held by the graph and return to zero after backward", "[engine]") {
  int64_t before = category_bytes(MemoryCategory::Activation);
  Tensor x = leaf({64, 32}, 1).set_memory_category(MemoryCategory::Input);
  Tensor w = leaf({32, 16}, 2).set_memory_category(MemoryCategory::Parameter);
  Tensor hidden = sigmoid(matmul(x, w));   // sigmoid saves its (64, 16) float64 output
  Tensor loss = (hidden * hidden).sum();   // mul saves hidden (already counted)
  // matmul saves x and w, but an INPUT or PARAMETER stays what it is: it would be alive
  // without the graph. Only intermediate (TEMPORARY) results become ACTIVATION.
  CHECK(category_bytes(MemoryCategory::Activation) - before == 64 * 16 * 8);
  loss.backward();
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  REQUIRE(w.grad().defined());
}

TEST_CASE("no_grad records nothing and saves no activation bytes", "[engine]") {
  int64_t before = category_bytes(MemoryCategory::Activation);
  Tensor x = leaf({128, 64}, 3);
  NoGradGuard no_grad;
  Tensor y = sigmoid(x * 3.0);
  CHECK_FALSE(y.requires_grad());
  CHECK_FALSE(y.grad_fn());
  CHECK(category_bytes(MemoryCategory::Activation) == before);
  {
    EnableGradGuard enable;
    CHECK(GradMode::is_enabled());
    CHECK(sigmoid(x).requires_grad());
  }
  CHECK_FALSE(GradMode::is_enabled());
}

TEST_CASE("a second backward needs retain_graph, and says so", "[engine]") {
  Tensor x = leaf({4}, 4);
  Tensor loss = sigmoid(x).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  std::vector<double> first = x.grad().to_vector<double>();
  loss.backward();  // allowed: the graph was retained
  std::vector<double> second = x.grad().to_vector<double>();
  for (size_t i = 0; i < first.size(); ++i) CHECK(second[i] == Approx(2 * first[i]));
  try {
    loss.backward();
    FAIL("a third backward through a released graph must throw");
  } catch (const Error& error) {
    std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("SigmoidBackward"));
    CHECK_THAT(message, Catch::Contains("retain_graph=true"));
  }
}

TEST_CASE("an in-place change to a saved tensor is caught at backward", "[engine]") {
  Tensor x = leaf({5}, 5);
  Tensor y = x.exp();  // ExpBackward saves its output y
  {
    NoGradGuard no_grad;
    y.mul_(2.0);
  }
  try {
    y.sum().backward();
    FAIL("backward must detect the modified saved tensor");
  } catch (const Error& error) {
    std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("ExpBackward"));
    CHECK_THAT(message, Catch::Contains("version 0"));
    CHECK_THAT(message, Catch::Contains("version 1"));
  }
}

TEST_CASE("a 10,000-op chain runs backward and is freed without deep recursion", "[engine]") {
  Tensor x = leaf({1}, 6);
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;
  y.backward();
  CHECK(x.grad().item() == Approx(std::pow(1.0001, 10000)));
  y = Tensor();  // drops the whole chain
}

TEST_CASE("tensor hooks see and may replace gradients and retain_grad keeps non-leaf grads", "[engine]") {
  Tensor x = leaf({3}, 7);
  Tensor hidden = x * 2.0;
  std::vector<double> seen;
  hidden.register_hook([&](const Tensor& grad) {
    seen = grad.to_vector<double>();
    return grad * 10.0;
  });
  hidden.retain_grad();
  x.register_hook([](const Tensor& grad) { return Tensor(); });  // observe only
  hidden.sum().backward();
  CHECK(seen == std::vector<double>{1.0, 1.0, 1.0});
  CHECK(hidden.grad().to_vector<double>() == std::vector<double>{10.0, 10.0, 10.0});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{20.0, 20.0, 20.0});
}

TEST_CASE("detach allocates nothing and clone allocates the tensor's bytes and keeps the path", "[engine]") {
  Tensor x = leaf({1000}, 8);
  auto& allocator = allocator_for(Device::cpu());
  int64_t before = allocator.stats().requested_bytes.current;
  Tensor detached = x.detach();
  CHECK(allocator.stats().requested_bytes.current == before);
  CHECK_FALSE(detached.requires_grad());
  CHECK(detached.storage() == x.storage());
  Tensor cloned = x.clone();
  CHECK(allocator.stats().requested_bytes.current == before + 8000);
  REQUIRE(cloned.grad_fn());
  (cloned * 3.0).sum().backward();
  CHECK(x.grad().to_vector<double>()[0] == 3.0);
}

TEST_CASE("backward rejects outputs without history and non-scalar outputs without a gradient", "[engine]") {
  Tensor plain = ones({2});
  CHECK_THROWS_WITH(plain.sum().backward(), Catch::Contains("does not require grad"));
  Tensor x = leaf({2, 2}, 9);
  CHECK_THROWS_WITH((x * 2.0).backward(), Catch::Contains("shape [2, 2]"));
  Tensor y = x * 2.0;
  y.backward(ones({2, 2}, {.dtype = DType::Float64}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>(4, 2.0));
}

TEST_CASE("requires_grad_ is only for floating leaves", "[engine]") {
  CHECK_THROWS_WITH(zeros({2}, {.dtype = DType::Int64}).requires_grad_(), Catch::Contains("int64"));
  Tensor x = leaf({2}, 10);
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.requires_grad_(false), Catch::Contains("leaf"));
}

namespace {

// probe(x) = x, whose node records whether it was its input's only consumer when its
// backward ran (autograd::is_sole_consumer).
Tensor probe(const Tensor& x, bool& sole) {
  Tensor out = x.detach().clone();
  autograd::record("ProbeBackward", out, {x}, autograd::saved(),
                   [&sole](const autograd::Node& node, const Tensor& grad) {
                     sole = autograd::is_sole_consumer(node, 0);
                     return std::vector<Tensor>{grad};
                   });
  return out;
}

}  // namespace

TEST_CASE("is_sole_consumer: only the one consumer of an unwatched gradient is", "[engine]") {
  Tensor x = leaf({4}, 3);
  bool sole = false;
  SECTION("one consumer") {
    probe(x * 2.0, sole).sum().backward();
    CHECK(sole);
  }
  SECTION("another consumer still to run") {
    Tensor a = x * 2.0;
    (probe(a, sole).sum() + a.sum()).backward();
    CHECK_FALSE(sole);
  }
  SECTION("retain_grad watches the gradient") {
    Tensor a = x * 2.0;
    a.retain_grad();
    probe(a, sole).sum().backward();
    CHECK_FALSE(sole);
  }
  SECTION("a hook watches the gradient") {
    Tensor a = x * 2.0;
    a.register_hook([](const Tensor& grad) { return grad; });
    probe(a, sole).sum().backward();
    CHECK_FALSE(sole);
  }
  SECTION("a leaf's accumulation has a single consumer too") {
    probe(x, sole).sum().backward();
    CHECK(sole);
  }
  // Outside a backward there is no consumer to ask about.
  Tensor y = probe(x * 2.0, sole);
  CHECK_FALSE(autograd::is_sole_consumer(*y.grad_fn(), 0));
}
