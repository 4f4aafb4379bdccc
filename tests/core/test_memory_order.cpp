// tests/core/test_memory_order.cpp — memory_order: the dim order elementwise loops walk, so
// that channels-last operands are walked (and merged) like contiguous ones.
#include <catch2/catch.hpp>

#include <array>

#include "memgrad/core/memory_format.h"
#include "memgrad/core/memory_order.h"

using namespace mg;

TEST_CASE("memory_order walks channels_last operands as N, H, W, C", "[core]") {
  Shape sizes{2, 3, 4, 5};
  Shape last = strides_for(sizes, MemoryFormat::ChannelsLast);  // (60, 1, 15, 3)
  CHECK(memory_order(sizes, std::array<Shape, 2>{last, last}) == Shape{0, 2, 3, 1});
  CHECK(permuted(last, Shape{0, 2, 3, 1}) == Shape{60, 15, 3, 1});
  CHECK(permuted(sizes, Shape{0, 2, 3, 1}) == Shape{2, 4, 5, 3});
}

TEST_CASE("memory_order keeps row-major order for contiguous operands and ties", "[core]") {
  Shape sizes{2, 3, 4, 5};
  Shape contiguous = strides_for(sizes, MemoryFormat::Contiguous);
  CHECK(memory_order(sizes, std::array<Shape, 1>{contiguous}) == Shape{0, 1, 2, 3});
  // A scalar broadcast everywhere has no say.
  CHECK(memory_order(sizes, std::array<Shape, 1>{Shape{0, 0, 0, 0}}) == Shape{0, 1, 2, 3});
}

TEST_CASE("memory_order: the first operand decides, broadcast dims defer to the next", "[core]") {
  Shape sizes{2, 3, 4, 5};
  Shape last = strides_for(sizes, MemoryFormat::ChannelsLast);
  Shape contiguous = strides_for(sizes, MemoryFormat::Contiguous);
  CHECK(memory_order(sizes, std::array<Shape, 2>{contiguous, last}) == Shape{0, 1, 2, 3});
  CHECK(memory_order(sizes, std::array<Shape, 2>{last, contiguous}) == Shape{0, 2, 3, 1});
  // A per-channel bias (1, C, 1, 1) broadcast first: only its channel stride is non-zero,
  // so the channels-last operand orders the rest.
  CHECK(memory_order(sizes, std::array<Shape, 2>{Shape{0, 1, 0, 0}, last}) == Shape{0, 2, 3, 1});
}
