// tests/autograd/test_backward_hooks.cpp — what data-parallel training asks of backward:
// a leaf's post-accumulate-grad hooks (they run once per backward, after its .grad holds
// the summed gradient, and can be removed) and callbacks queued for the end of backward
// (they run after every hook of the backward the user called, also when a checkpoint runs
// a nested backward, and are dropped when backward throws).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "memgrad/autograd/checkpoint.h"
#include "memgrad/autograd/elementwise.h"
#include "memgrad/autograd/engine.h"
#include "memgrad/autograd/reduce.h"
#include "autograd/tensor_checks.h"
#include "memgrad/core/factory.h"

using namespace mg;
using mg_test::contains;
using mg_test::error_message;

namespace {

Tensor leaf(std::vector<double> values) {
  return from_vector(values, {static_cast<int64_t>(values.size())}).requires_grad_();
}

}  // namespace

TEST_CASE("a post-accumulate-grad hook runs once per backward and sees the accumulated .grad",
          "[autograd][hooks]") {
  Tensor w = leaf({1.0, 2.0});
  std::vector<std::vector<double>> seen;  // w.grad() at each call
  w.register_post_accumulate_grad_hook([&](const Tensor& param) {
    CHECK(param.is_same(w));
    seen.push_back(param.grad().to_vector<double>());
  });
  // w used twice: the engine sums both paths first, so the hook runs once.
  sum(add(mul(w, 3.0), mul(w, w))).backward();  // d/dw = 3 + 2w
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5.0, 7.0});
  // A second backward accumulates into .grad before the hook runs again.
  sum(mul(w, 10.0)).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{15.0, 17.0});
}

TEST_CASE("post-accumulate-grad hooks run after register_hook's, in registration order, and can be removed",
          "[autograd][hooks]") {
  Tensor w = leaf({1.0});
  std::vector<std::string> order;
  w.register_hook([&](const Tensor& grad) {
    order.push_back("grad hook");
    return mul(grad, 2.0);  // replaces the gradient before it is accumulated
  });
  const uint64_t first = w.register_post_accumulate_grad_hook([&](const Tensor& param) {
    order.push_back("first, grad " + std::to_string(param.grad().item<double>()));
  });
  uint64_t second = 0;
  second = w.register_post_accumulate_grad_hook([&](const Tensor& param) {
    order.push_back("second");
    param.remove_post_accumulate_grad_hook(second);  // removing itself while they run
  });
  sum(w).backward();
  CHECK(order == std::vector<std::string>{"grad hook", "first, grad 2.000000", "second"});

  order.clear();
  w.remove_post_accumulate_grad_hook(first);
  w.remove_post_accumulate_grad_hook(first);  // again: ignored
  sum(w).backward();
  CHECK(order == std::vector<std::string>{"grad hook"});
  CHECK(w.grad().item<double>() == 4.0);
}

TEST_CASE("post-accumulate-grad hooks only on leaves that require grad", "[autograd][hooks]") {
  Tensor w = leaf({1.0});
  Tensor y = mul(w, 2.0);
  CHECK(contains(error_message([&] { y.register_post_accumulate_grad_hook([](const Tensor&) {}); }),
                 "is not a leaf"));
  Tensor constant = from_vector(std::vector<double>{1.0}, {1});
  CHECK(contains(error_message([&] { constant.register_post_accumulate_grad_hook([](const Tensor&) {}); }),
                 "does not require grad"));
}

TEST_CASE("queue_callback runs once the backward's last gradient is accumulated, in queue order",
          "[autograd][hooks]") {
  Tensor a = leaf({1.0});
  Tensor b = leaf({2.0});
  std::vector<std::string> events;
  auto record_and_queue = [&](const char* name) {
    return [&, name](const Tensor&) {
      events.push_back(name);
      if (events.size() == 1) {
        autograd::queue_callback([&] {
          events.push_back("end");
          autograd::queue_callback([&] { events.push_back("queued by a callback"); });
        });
      }
    };
  };
  a.register_post_accumulate_grad_hook(record_and_queue("a"));
  b.register_post_accumulate_grad_hook(record_and_queue("b"));
  sum(mul(a, b)).backward();
  REQUIRE(events.size() == 4);
  CHECK(events[2] == "end");  // after both leaves' hooks, whatever order they ran in
  CHECK(events[3] == "queued by a callback");
  CHECK_FALSE(autograd::in_backward());

  CHECK(contains(error_message([] { autograd::queue_callback([] {}); }), "no backward is running"));
}

TEST_CASE("a callback queued inside a checkpoint's nested backward runs when the outer backward ends",
          "[autograd][hooks]") {
  Tensor inner = leaf({3.0});  // used inside the checkpoint: accumulated by the nested backward
  Tensor outer = leaf({5.0});  // used after it: accumulated by the outer backward, later
  Tensor x = leaf({2.0});
  std::vector<std::string> events;
  inner.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("inner");
    autograd::queue_callback([&] { events.push_back("end"); });
  });
  outer.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("outer"); });
  Tensor hidden = checkpoint([&](const Tensor& input) { return mul(input, inner); }, x);
  sum(mul(hidden, outer)).backward();
  CHECK(events == std::vector<std::string>{"outer", "inner", "end"});
  CHECK(inner.grad().item<double>() == 10.0);
}

TEST_CASE("a backward that throws drops the callbacks queued during it", "[autograd][hooks]") {
  Tensor w = leaf({1.0});
  int callbacks_run = 0;
  bool fail = true;
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    autograd::queue_callback([&] { ++callbacks_run; });
    if (fail) throw Error("hook failed");
  });
  CHECK(error_message([&] { sum(w).backward(); }) == "hook failed");
  CHECK(callbacks_run == 0);
  CHECK_FALSE(autograd::in_backward());
  fail = false;
  sum(w).backward();
  CHECK(callbacks_run == 1);  // only the one queued by this backward
}
