// data/transforms.h — image augmentation for a batch of images on the host, as the
// ResNet example trains with it: centre a 28x28 Fashion-MNIST image on a 32x32 canvas,
// then (optionally) torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip().
//
//   std::mt19937_64 engine(seed + epoch);   // a seed per epoch: a resumed run repeats it
//   Tensor images = augment(batch.inputs, {.size = 32, .crop_padding = 4, .horizontal_flip = true,
//                                          .fill = black}, engine);
//
// NOTE: the draws are taken from the engine's raw 64-bit output (offset = draw % range)
// rather than std::uniform_int_distribution, whose algorithm each standard library
// chooses, so a seed gives the same images everywhere. Each image takes its draws in a
// fixed order (row offset, column offset, flip), and only the draws its options ask for.
#pragma once

#include <cstdint>
#include <random>

#include "memgrad/core/tensor.h"

namespace mg::data {

struct AugmentOptions {
  // Height and width of the output; smaller images are centred (larger ones are refused).
  int64_t size = 32;
  // > 0: shift each image by a random offset in [-crop_padding, crop_padding] in each
  // direction, showing `fill` where it moves past the canvas (RandomCrop with padding).
  int64_t crop_padding = 0;
  // Mirror each image left to right with probability 1/2.
  bool horizontal_flip = false;
  // The value of every pixel outside the image: pass the normalised value of black, so
  // padding looks like the images' own background.
  float fill = 0;
};

// (B, C, H, W) float32 CPU images -> new (B, C, size, size) float32 CPU images (TEMPORARY).
Tensor augment(const Tensor& images, const AugmentOptions& options, std::mt19937_64& engine);

}  // namespace mg::data
