// docs/guide/synthetic_data.h — a small made-up dataset in MNIST's format, so that the
// guide's programs train on something without downloading anything.
//
// memgrad's DataLoader serves MNIST-format folders (IDX files of uint8 images and labels),
// so the data is written as one: ten classes of 8x8 images, each class a fixed random
// pattern, each sample that pattern plus noise. A small MLP learns it in a few epochs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

class SyntheticMnist {
 public:
  static constexpr int kSide = 8;       // images are kSide x kSide
  static constexpr int kClasses = 10;

  // Writes train-* (train_size samples) and t10k-* (test_size samples) to a fresh folder
  // under the system's temporary directory.
  explicit SyntheticMnist(int64_t train_size = 4096, int64_t test_size = 1024, uint64_t seed = 0)
      : dir_(std::filesystem::temp_directory_path() /
             ("memgrad-guide-" + std::to_string(::getpid()) + "-" + std::to_string(instances_++))) {
    std::filesystem::create_directories(dir_);
    std::mt19937_64 engine(seed);
    std::uniform_int_distribution<int> pixel(0, 255);
    std::vector<std::vector<int>> patterns(kClasses, std::vector<int>(kSide * kSide));
    for (auto& pattern : patterns) std::generate(pattern.begin(), pattern.end(), [&] { return pixel(engine); });
    write_split("train", train_size, patterns, engine);
    nearest_pattern_accuracy_ = write_split("t10k", test_size, patterns, engine);
  }
  ~SyntheticMnist() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SyntheticMnist(const SyntheticMnist&) = delete;
  SyntheticMnist& operator=(const SyntheticMnist&) = delete;

  std::string dir() const { return dir_.string(); }
  // The share of the test split that a classifier knowing the ten patterns gets right by
  // picking the nearest one: about as well as any model can do on this data.
  double nearest_pattern_accuracy() const { return nearest_pattern_accuracy_; }

 private:
  // Writes one split; returns the share of its samples nearest to their own class's pattern.
  double write_split(const std::string& prefix, int64_t size, const std::vector<std::vector<int>>& patterns,
                     std::mt19937_64& engine) const {
    // NOTE: noise with a standard deviation of 150 grey levels makes the classes overlap,
    // so that no model gets every sample right.
    std::normal_distribution<double> noise(0.0, 150.0);
    std::uniform_int_distribution<int> label(0, kClasses - 1);
    std::vector<uint8_t> images, labels;
    int64_t nearest_own = 0;
    for (int64_t i = 0; i < size; ++i) {
      const int y = label(engine);
      labels.push_back(static_cast<uint8_t>(y));
      std::vector<uint8_t> image;
      for (int value : patterns[y]) {
        image.push_back(static_cast<uint8_t>(std::clamp(value + noise(engine), 0.0, 255.0)));
      }
      images.insert(images.end(), image.begin(), image.end());
      nearest_own += nearest_pattern(image, patterns) == y;
    }
    const auto n = static_cast<uint32_t>(size);
    write_ubyte_idx(prefix + "-images-idx3-ubyte", {n, kSide, kSide}, images);
    write_ubyte_idx(prefix + "-labels-idx1-ubyte", {n}, labels);
    return static_cast<double>(nearest_own) / static_cast<double>(size);
  }

  // The class whose pattern is nearest to `image` (squared distance).
  static int nearest_pattern(const std::vector<uint8_t>& image, const std::vector<std::vector<int>>& patterns) {
    int nearest = 0;
    int64_t nearest_distance = INT64_MAX;
    for (int c = 0; c < kClasses; ++c) {
      int64_t distance = 0;
      for (size_t i = 0; i < image.size(); ++i) {
        const int64_t difference = image[i] - patterns[c][i];
        distance += difference * difference;
      }
      if (distance < nearest_distance) {
        nearest = c;
        nearest_distance = distance;
      }
    }
    return nearest;
  }

  // An IDX file of unsigned bytes: magic (0, 0, 0x08, rank), big-endian sizes, the values.
  void write_ubyte_idx(const std::string& name, const std::vector<uint32_t>& dims,
                       const std::vector<uint8_t>& values) const {
    std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
    for (uint32_t dim : dims) {
      for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(dim >> shift));
    }
    bytes.insert(bytes.end(), values.begin(), values.end());
    const std::string path = (dir_ / name).string();
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!file.good()) throw std::runtime_error("cannot write " + path);
  }

  inline static int instances_ = 0;  // each instance writes its own folder
  std::filesystem::path dir_;
  double nearest_pattern_accuracy_ = 0;
};
