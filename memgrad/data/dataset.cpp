// data/dataset.cpp — loads an MNIST-format split into two INPUT tensors and checks that
// the image and label files belong together.
#include "memgrad/data/dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

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

MnistDataset::MnistDataset(const std::string& dir, Split split,
                           std::optional<Normalization> normalization) {
  const SplitFiles stems = split_files(split);
  const std::string images_path = find_idx_file(dir, stems.images);
  const std::string labels_path = find_idx_file(dir, stems.labels);
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);

  MG_CHECK(images.type == IdxType::UnsignedByte && images.dims.size() == 3, "'", images_path,
           "' holds ", idx_type_name(images.type), " elements of shape ", dims_text(images.dims),
           "; MNIST-format images are ubyte of shape (N, rows, cols).");
  // NOTE: requiring ubyte labels also bounds them below 256, so num_classes() stays small
  // whatever the file holds.
  MG_CHECK(labels.type == IdxType::UnsignedByte && labels.dims.size() == 1, "'", labels_path,
           "' holds ", idx_type_name(labels.type), " elements of shape ", dims_text(labels.dims),
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
    label_values[i] = labels.bytes[i];
    num_classes_ = std::max<int64_t>(num_classes_, label_values[i] + 1);
  }

  normalization_ = normalization ? *normalization : pixel_statistics(images_);
  MG_CHECK(normalization_.std > 0, "cannot normalise the images of '", images_path,
           "' with std ", normalization_.std,
           normalization ? "" : " (every pixel has the same value)",
           ". Hint: pass a Normalization with a positive std.");
}

}  // namespace mg::data
