// data/mnist_dataset.h — MnistDataset: one split (train or test) of an MNIST-format folder
// as a Dataset of (image, label) examples: float32 images normalised as the options say,
// int64 labels checked against the class count.
//
//   mg::data::MnistDataset train(folder, mg::data::Split::Train);
//   mg::data::MnistDataset test(folder, mg::data::Split::Test, {.normalization = train.normalization()});
//   mg::data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 1});
//   // batch.inputs (B, 1, H, W) float32, batch.targets (B) int64
//
// NOTE: images stay uint8 in memory (1 byte per pixel, 47 MB for Fashion-MNIST's training
// split) instead of being converted to float32 up front (4x that): a batch converts and
// normalises only its own images. Both tensors are tagged INPUT, so the dataset's bytes
// show up in the memory report under the category they belong to.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memgrad/core/tensor.h"
#include "memgrad/data/dataset.h"

namespace mg::data {

// Pixels are scaled to [0, 1] (x / 255), then normalised as (x - mean) / std.
struct Normalization {
  double mean = 0.0;
  double std = 1.0;
};

enum class Split { Train, Test };

struct MnistOptions {
  // Without one, the mean and std of this split's own pixels are used.
  // NOTE: pass the training split's normalization() when loading the test split, so that
  // both are normalised with statistics of the training data only (as a model in use
  // would be: the test set must not shape its own inputs).
  std::optional<Normalization> normalization = std::nullopt;
  // Images as (H*W) rows, ready for a Linear layer, instead of (1, H, W).
  bool flatten = false;
  // Every label must lie in [0, num_classes): MNIST and Fashion-MNIST have 10 classes. A
  // label outside is an error naming the labels file, the sample and the label (rather
  // than a model with as many outputs as the largest label asks for).
  int64_t num_classes = 10;
};

class MnistDataset : public Dataset {
 public:
  // Loads `split` from `dir` (train-images-idx3-ubyte and train-labels-idx1-ubyte, or the
  // t10k-* pair; gzipped or not). Images may have any rows x cols.
  MnistDataset(const std::string& dir, Split split, MnistOptions options = {});

  int64_t size() const override { return images_.size(0); }
  // (image, label): float32 (1, H, W), or (H*W) with flatten; an int64 scalar.
  Example get(int64_t index) const override;
  // The images at `indices` converted and normalised straight into the batch, and their labels.
  std::vector<Tensor> get_batch(std::span<const int64_t> indices, bool pin_memory) const override;

  // (H, W) of one image.
  Shape image_shape() const { return {images_.size(1), images_.size(2)}; }
  // The shape get() gives an image: (1, H, W), or (H*W) with flatten.
  Shape sample_shape() const;
  int64_t num_classes() const { return options_.num_classes; }
  const Normalization& normalization() const { return normalization_; }

  const Tensor& images() const { return images_; }  // (N, H, W) uint8
  const Tensor& labels() const { return labels_; }  // (N) int64

 private:
  // Writes images[index]'s pixels, converted and normalised, to `out`.
  void convert_image(int64_t index, float* out) const;

  MnistOptions options_;
  Tensor images_;
  Tensor labels_;
  Normalization normalization_;
  float normalized_[256];  // what each pixel value becomes: (value / 255 - mean) / std
};

}  // namespace mg::data
