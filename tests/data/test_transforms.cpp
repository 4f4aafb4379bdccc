// tests/data/test_transforms.cpp — augment(): centring on a larger canvas, random crops
// (shifts with fill at the edges) and horizontal flips, checked pixel by pixel against a
// reference written from the definition (each output image must be the input shifted by
// some (dy, dx) in range, mirrored or not); reproducible from the seed, and every shift
// and both flips actually occur.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/data/transforms.h"

using mg::Tensor;
using mg::data::AugmentOptions;
using Catch::Matchers::Contains;

namespace {

constexpr float kFill = -0.5f;

// (B, C, H, W) images whose every pixel is distinct and positive.
Tensor numbered_images(int64_t batch, int64_t channels, int64_t height, int64_t width) {
  std::vector<float> values(batch * channels * height * width);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i);
  return mg::from_vector(values, {batch, channels, height, width});
}

// Output pixel (y, x) of image b, channel c, from the definition: the image centred on a
// size x size canvas of kFill, shifted by (dy, dx), then mirrored when `flip`.
float expected_pixel(const std::vector<float>& in, int64_t channels, int64_t height, int64_t width, int64_t size,
                     int64_t b, int64_t c, int64_t y, int64_t x, int64_t dy, int64_t dx, bool flip) {
  const int64_t canvas_x = (flip ? size - 1 - x : x) + dx, canvas_y = y + dy;
  const int64_t row = canvas_y - (size - height) / 2, col = canvas_x - (size - width) / 2;
  if (row < 0 || row >= height || col < 0 || col >= width) return kFill;
  return in[((b * channels + c) * height + row) * width + col];
}

// The (dy, dx, flip) within `padding` that explains image b of `out` exactly, or none.
std::vector<std::tuple<int64_t, int64_t, bool>> explanations(const Tensor& images, const Tensor& out, int64_t size,
                                                             int64_t padding, int64_t b) {
  const std::vector<float> in = images.to_vector<float>(), got = out.to_vector<float>();
  const int64_t channels = images.size(1), height = images.size(2), width = images.size(3);
  std::vector<std::tuple<int64_t, int64_t, bool>> found;
  for (int64_t dy = -padding; dy <= padding; ++dy) {
    for (int64_t dx = -padding; dx <= padding; ++dx) {
      for (bool flip : {false, true}) {
        bool all = true;
        for (int64_t c = 0; c < channels && all; ++c) {
          for (int64_t y = 0; y < size && all; ++y) {
            for (int64_t x = 0; x < size && all; ++x) {
              all = got[((b * channels + c) * size + y) * size + x] ==
                    expected_pixel(in, channels, height, width, size, b, c, y, x, dy, dx, flip);
            }
          }
        }
        if (all) found.emplace_back(dy, dx, flip);
      }
    }
  }
  return found;
}

}  // namespace

TEST_CASE("augment without randomness centres the images on the canvas", "[data][transforms]") {
  const Tensor images = numbered_images(2, 1, 28, 28);
  std::mt19937_64 engine(1);
  const std::mt19937_64 untouched = engine;
  const Tensor out = mg::data::augment(images, {.size = 32, .fill = kFill}, engine);
  REQUIRE(out.sizes() == mg::Shape{2, 1, 32, 32});
  const std::vector<float> got = out.to_vector<float>();
  CHECK(got[0] == kFill);                         // the 2-pixel border
  CHECK(got[2 * 32 + 2] == 1.0f);                 // the first pixel lands at (2, 2)
  CHECK(got[29 * 32 + 29] == 28.0f * 28.0f);      // the last at (29, 29)
  CHECK(got[30 * 32 + 30] == kFill);
  for (int64_t b = 0; b < 2; ++b) {
    CHECK(explanations(images, out, 32, 0, b) == std::vector<std::tuple<int64_t, int64_t, bool>>{{0, 0, false}});
  }
  CHECK(engine == untouched);  // no draws were needed
}

TEST_CASE("augment crops and flips each image by a random amount within the padding", "[data][transforms]") {
  const Tensor images = numbered_images(48, 2, 6, 5);  // 2 channels: both move together
  const AugmentOptions options{.size = 8, .crop_padding = 2, .horizontal_flip = true, .fill = kFill};
  std::mt19937_64 engine(42);
  const Tensor out = mg::data::augment(images, options, engine);
  REQUIRE(out.sizes() == mg::Shape{48, 2, 8, 8});
  std::set<int64_t> shifts_y, shifts_x;
  std::set<bool> flips;
  for (int64_t b = 0; b < 48; ++b) {
    INFO("image " << b);
    const auto found = explanations(images, out, 8, 2, b);
    REQUIRE(found.size() == 1);  // distinct pixels: exactly one explanation
    shifts_y.insert(std::get<0>(found[0]));
    shifts_x.insert(std::get<1>(found[0]));
    flips.insert(std::get<2>(found[0]));
  }
  CHECK(shifts_y.size() == 5);  // every shift in [-2, 2] occurs in 48 draws
  CHECK(shifts_x.size() == 5);
  CHECK(flips.size() == 2);

  std::mt19937_64 same_seed(42), other_seed(43);
  CHECK(mg::data::augment(images, options, same_seed).to_vector<float>() == out.to_vector<float>());
  CHECK(mg::data::augment(images, options, other_seed).to_vector<float>() != out.to_vector<float>());
}

TEST_CASE("augment refuses images it cannot place", "[data][transforms]") {
  std::mt19937_64 engine(0);
  CHECK_THROWS_WITH(mg::data::augment(numbered_images(1, 1, 36, 36), {.size = 32}, engine),
                    Contains("images of 36x36 do not fit the 32x32 output"));
  CHECK_THROWS_WITH(mg::data::augment(mg::zeros({4, 28, 28}), {.size = 32}, engine),
                    Contains("expected (B, C, H, W) float32 images on the CPU, got [4, 28, 28]"));
}
