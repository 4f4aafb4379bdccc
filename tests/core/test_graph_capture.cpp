// tests/core/test_graph_capture.cpp — the capture state every build keeps (core/
// graph_capture.h): refusals only while a capture is underway, one capture per thread,
// ids live until retired.
#include <catch2/catch.hpp>

#include <thread>

#include "memgrad/core/error.h"
#include "memgrad/core/graph_capture.h"

TEST_CASE("refusals fire only while this thread captures, and name the operation", "[graph-capture]") {
  CHECK_FALSE(mg::graph_capture_underway());
  CHECK(mg::current_graph_capture() == 0);
  CHECK_NOTHROW(mg::refuse_during_graph_capture("item()", "read it after replay()"));
  uint64_t id = 0;
  {
    mg::GraphCaptureScope capturing;
    id = capturing.id();
    CHECK(id != 0);
    CHECK(mg::graph_capture_underway());
    CHECK(mg::current_graph_capture() == id);
    CHECK_THROWS_WITH(mg::refuse_during_graph_capture("item()", "read it after replay()"),
                      Catch::Contains("item() during CUDA graph capture") &&
                          Catch::Contains("Hint: read it after replay()"));
    CHECK_THROWS_WITH(mg::GraphCaptureScope(), Catch::Contains("already underway"));
    // Another thread is not capturing.
    bool other_thread_captures = true;
    std::thread([&] { other_thread_captures = mg::graph_capture_underway(); }).join();
    CHECK_FALSE(other_thread_captures);
  }
  CHECK_FALSE(mg::graph_capture_underway());
  CHECK(mg::graph_capture_live(id));  // the graph lives on after its capture
  mg::retire_graph_capture(id);
  CHECK_FALSE(mg::graph_capture_live(id));
  mg::GraphCaptureScope next;
  CHECK(next.id() != id);  // ids are never reused
  mg::retire_graph_capture(next.id());
}
