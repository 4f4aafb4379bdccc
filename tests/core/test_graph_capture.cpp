// tests/core/test_graph_capture.cpp — the capture and warm-up flags every build keeps
// (core/graph_capture.h): refusals only while this thread captures, one at a time; random
// draws for the CPU refused there, and a capture's draws never move a generator.
#include <catch2/catch.hpp>

#include <thread>

#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"
#include "memgrad/core/random.h"

TEST_CASE("refusals fire only while this thread captures, and name the operation", "[graph-capture]") {
  CHECK_FALSE(mg::graph_capture_underway());
  CHECK_NOTHROW(mg::refuse_during_graph_capture("item()", "read it after replay()"));
  {
    mg::GraphCaptureScope capturing;
    CHECK(mg::graph_capture_underway());
    CHECK_FALSE(mg::graph_warmup_underway());
    CHECK_THROWS_WITH(mg::refuse_during_graph_capture("item()", "read it after replay()"),
                      Catch::Contains("item() during CUDA graph capture") &&
                          Catch::Contains("Hint: read it after replay()"));
    CHECK_THROWS_WITH(mg::GraphCaptureScope(), Catch::Contains("already underway"));
    CHECK_THROWS_WITH(mg::GraphWarmupScope(), Catch::Contains("already underway"));
    // Another thread is not capturing.
    bool other_thread_captures = true;
    std::thread([&] { other_thread_captures = mg::graph_capture_underway(); }).join();
    CHECK_FALSE(other_thread_captures);
  }
  CHECK_FALSE(mg::graph_capture_underway());
  {
    mg::GraphWarmupScope warming_up;
    CHECK(mg::graph_warmup_underway());
    CHECK_NOTHROW(mg::refuse_during_graph_capture("item()", "read it after replay()"));
  }
  CHECK_FALSE(mg::graph_warmup_underway());
}

TEST_CASE("a capture refuses random draws for the CPU and leaves generators where it found them",
          "[graph-capture]") {
  mg::Generator generator(7);
  (void)generator.reserve(10, mg::Device::cpu());
  {
    mg::GraphCaptureScope capturing;
    CHECK_THROWS_WITH(generator.reserve(5, mg::Device::cpu()),
                      Catch::Contains("a random draw for cpu during CUDA graph capture"));
    CHECK(capturing.draws().empty());
  }
  // The refused draw happened on the host only until the capture ended.
  CHECK(generator.state().offset == 10);
  CHECK(generator.state().seed == 7);
  CHECK(generator.reserve(1, mg::Device::cpu()).offset == 10);
}
