// data/mnist_dataset.cpp — loads an MNIST-format split into two INPUT tensors, checks that
// the image and label files belong together and that every label names a class, and
// converts images to normalised float32 for a batch.
#include "memgrad/data/mnist_dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "memgrad/core/error.h"
#include "memgrad/core/factory.h"
#include "memgrad/data/idx.h"

namespace mg::data {
namespace {

// The IDX file stems of each split, as the MNIST distribution names them.
struct SplitFiles {
  const char* images;
  const char* labels;
};

SplitFiles split_files(Split split) {
  if (split == Split::Train) return {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
  return {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) text += 'x';
    text += std::to_string(dims[i]);
  }
  return text;
}

// Mean and standard deviation of the pixels of `images` (contiguous uint8) scaled to [0, 1].
Normalization pixel_statistics(const Tensor& images) {
  // A histogram of the 256 byte values makes the sums exact and cheap.
  std::array<int64_t, 256> counts{};
  const uint8_t* pixels = images.data_ptr<uint8_t>();
  for (int64_t i = 0; i < images.numel(); ++i) ++counts[pixels[i]];

  double sum = 0.0, sum_of_squares = 0.0;
  for (int value = 0; value < 256; ++value) {
    const double scaled = value / 255.0;
    sum += counts[value] * scaled;
    sum_of_squares += counts[value] * scaled * scaled;
  }
  const double count = static_cast<double>(images.numel());
  const double mean = sum / count;
  const double variance = std::max(0.0, sum_of_squares / count - mean * mean);
  return {mean, std::sqrt(variance)};
}

}  // namespace

MnistDataset::MnistDataset(const std::string& dir, Split split, MnistOptions options) : options_(options) {
  MG_CHECK(options_.num_classes > 0, "MnistDataset: num_classes must be positive, got ", options_.num_classes, ".");
  const SplitFiles stems = split_files(split);
  const std::string images_path = find_idx_file(dir, stems.images);
  const std::string labels_path = find_idx_file(dir, stems.labels);
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);

  MG_CHECK(images.type == IdxType::UnsignedByte && images.dims.size() == 3, "'", images_path, "' holds ",
           idx_type_name(images.type), " elements of shape ", dims_text(images.dims),
           "; MNIST-format images are ubyte of shape (N, rows, cols).");
  MG_CHECK(labels.type == IdxType::UnsignedByte && labels.dims.size() == 1, "'", labels_path, "' holds ",
           idx_type_name(labels.type), " elements of shape ", dims_text(labels.dims),
           "; MNIST-format labels are ubyte of shape (N).");
  MG_CHECK(images.dims[0] == labels.dims[0], "'", images_path, "' holds ", images.dims[0],
           " images but '", labels_path, "' holds ", labels.dims[0],
           " labels. Hint: the two files must come from the same split of the same dataset.");
  MG_CHECK(images.dims[0] > 0 && images.dims[1] > 0 && images.dims[2] > 0, "'", images_path,
           "' holds no pixels (shape ", dims_text(images.dims), ").");

  images_ = empty(Shape(images.dims), {.dtype = DType::UInt8, .category = MemoryCategory::Input});
  std::memcpy(images_.raw_data(), images.bytes.data(), images.bytes.size());

  labels_ = empty({labels.dims[0]}, {.dtype = DType::Int64, .category = MemoryCategory::Input});
  int64_t* label_values = labels_.data_ptr<int64_t>();
  for (size_t i = 0; i < labels.bytes.size(); ++i) {
    label_values[i] = labels.bytes[i];  // ubyte: never negative
    MG_CHECK(label_values[i] < options_.num_classes, "'", labels_path, "' gives sample ", i, " the label ",
             label_values[i], ", outside the ", options_.num_classes, " classes [0, ", options_.num_classes,
             "). Hint: the labels file is damaged or belongs to another dataset; a dataset of more classes needs ",
             "MnistOptions::num_classes.");
  }

  normalization_ = options_.normalization ? *options_.normalization : pixel_statistics(images_);
  MG_CHECK(normalization_.std > 0, "cannot normalise the images of '", images_path, "' with std ",
           normalization_.std, options_.normalization ? "" : " (every pixel has the same value)",
           ". Hint: pass a Normalization with a positive std.");
  for (int value = 0; value < 256; ++value) {
    normalized_[value] = static_cast<float>((value / 255.0 - normalization_.mean) / normalization_.std);
  }
}

Shape MnistDataset::sample_shape() const {
  const Shape image = image_shape();
  return options_.flatten ? Shape{image.numel()} : Shape{1, image[0], image[1]};
}

void MnistDataset::convert_image(int64_t index, float* out) const {
  MG_CHECK(index >= 0 && index < size(), "MnistDataset: index ", index, " outside the dataset's ", size(), " images.");
  const int64_t pixels = image_shape().numel();
  const uint8_t* image = images_.data_ptr<uint8_t>() + index * pixels;
  for (int64_t pixel = 0; pixel < pixels; ++pixel) out[pixel] = normalized_[image[pixel]];
}

Example MnistDataset::get(int64_t index) const {
  Tensor image = empty(sample_shape());
  convert_image(index, image.data_ptr<float>());
  return {image, labels_.select(0, index)};
}

std::vector<Tensor> MnistDataset::get_batch(std::span<const int64_t> indices, bool pin_memory) const {
  const auto rows = static_cast<int64_t>(indices.size());
  Tensor inputs = batch_tensor(rows, sample_shape(), DType::Float32, pin_memory);
  Tensor targets = batch_tensor(rows, {}, DType::Int64, pin_memory);
  const int64_t pixels = image_shape().numel();
  float* input_values = inputs.data_ptr<float>();
  int64_t* target_values = targets.data_ptr<int64_t>();
  const int64_t* labels = labels_.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t index = indices[static_cast<size_t>(row)];
    convert_image(index, input_values + row * pixels);
    target_values[row] = labels[index];
  }
  return {std::move(inputs), std::move(targets)};
}

}  // namespace mg::data
