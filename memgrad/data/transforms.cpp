// data/transforms.cpp — centring, random crops and flips of a batch of images, one output
// row at a time.
#include "memgrad/data/transforms.h"

#include <algorithm>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"

namespace mg::data {

Tensor augment(const Tensor& images, const AugmentOptions& options, std::mt19937_64& engine) {
  MG_CHECK(images.dim() == 4 && images.dtype() == DType::Float32 && images.device().is_cpu(),
           "augment: expected (B, C, H, W) float32 images on the CPU, got ", images.sizes(), " ",
           images.dtype(), " on ", images.device(), ". Hint: augment the batch before moving it.");
  const int64_t batch = images.size(0), channels = images.size(1), height = images.size(2),
                width = images.size(3), size = options.size;
  MG_CHECK(height <= size && width <= size, "augment: images of ", height, "x", width,
           " do not fit the ", size, "x", size, " output. Hint: AugmentOptions::size is the ",
           "output's size and must be at least the images' (centre crops are not supported).");
  MG_CHECK(options.crop_padding >= 0, "augment: crop_padding must be >= 0, got ", options.crop_padding);

  const Tensor source = images.contiguous();
  const float* in = source.data_ptr<float>();
  Tensor output = empty({batch, channels, size, size});
  float* out = output.data_ptr<float>();
  const auto shifts = static_cast<uint64_t>(2 * options.crop_padding + 1);
  // Where the image's first row and column land on the canvas when it is centred.
  const int64_t top = (size - height) / 2, left = (size - width) / 2;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t shift_y = 0, shift_x = 0;
    if (options.crop_padding > 0) {
      shift_y = static_cast<int64_t>(engine() % shifts) - options.crop_padding;
      shift_x = static_cast<int64_t>(engine() % shifts) - options.crop_padding;
    }
    const bool flip = options.horizontal_flip && (engine() & 1) != 0;
    for (int64_t c = 0; c < channels; ++c) {
      const float* plane = in + (b * channels + c) * height * width;  // (H, W)
      float* target = out + (b * channels + c) * size * size;        // (size, size)
      for (int64_t y = 0; y < size; ++y) {
        // Output (y, x) shows the canvas at (y + shift_y, x' + shift_x), x' mirrored when
        // flipping; the canvas shows the image at (row - top, col - left).
        const int64_t row = y + shift_y - top;
        float* target_row = target + y * size;
        if (row < 0 || row >= height) {
          std::fill(target_row, target_row + size, options.fill);
          continue;
        }
        for (int64_t x = 0; x < size; ++x) {
          const int64_t col = (flip ? size - 1 - x : x) + shift_x - left;
          target_row[x] = col >= 0 && col < width ? plane[row * width + col] : options.fill;
        }
      }
    }
  }
  return output;
}

}  // namespace mg::data
