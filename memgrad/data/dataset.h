// data/dataset.h — MnistDataset: one split (train or test) of an MNIST-format folder,
// held in memory as the raw bytes the files contain, and Batch, what a DataLoader yields.
//
// NOTE: images stay uint8 (1 byte per pixel, 47 MB for Fashion-MNIST's training split)
// instead of being converted to float32 up front (4x that): the DataLoader converts and
// normalises only the images of one batch at a time. Both tensors are tagged INPUT, so
// the dataset's bytes show up in the memory report under the category they belong to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "memgrad/core/tensor.h"

namespace mg::data {

// What a DataLoader yields: float32 images and their int64 class indices.
struct Batch {
  Tensor inputs;   // (B, 1, H, W), or (B, H*W) when flattened
  Tensor targets;  // (B)
};

// Pixels are scaled to [0, 1] (x / 255), then normalised as (x - mean) / std.
struct Normalization {
  double mean = 0.0;
  double std = 1.0;
};

enum class Split { Train, Test };

class MnistDataset {
 public:
  // Loads `split` from `dir` (train-images-idx3-ubyte and train-labels-idx1-ubyte, or the
  // t10k-* pair; gzipped or not). Images may have any rows x cols. Without
  // `normalization`, the mean and std of this split's own pixels are used.
  // NOTE: pass the training split's normalization() when loading the test split, so that
  // both are normalised with statistics of the training data only (as a model in use
  // would be: the test set must not shape its own inputs).
  MnistDataset(const std::string& dir, Split split,
               std::optional<Normalization> normalization = std::nullopt);

  int64_t size() const { return images_.size(0); }
  // (H, W) of one image.
  Shape image_shape() const { return {images_.size(1), images_.size(2)}; }
  // The largest label + 1.
  int64_t num_classes() const { return num_classes_; }
  const Normalization& normalization() const { return normalization_; }

  const Tensor& images() const { return images_; }  // (N, H, W) uint8
  const Tensor& labels() const { return labels_; }  // (N) int64

 private:
  Tensor images_;
  Tensor labels_;
  int64_t num_classes_ = 0;
  Normalization normalization_;
};

}  // namespace mg::data
