// docs/guide/synthetic_data.h — a small made-up dataset in memory, so that the guide's
// programs train on something without downloading anything: ten classes of 8x8 images,
// each class a fixed random pattern, each sample that pattern plus noise. A small MLP
// learns it in a few epochs.
//
// The images come as (N, 64) float32 rows, ready for a Linear layer and normalised as
// MnistDataset normalises real data: grey levels scaled to [0, 1], then standardised with
// the training split's mean and std (the test split with the same two numbers); the
// labels as (N) int64 class indices. docs/guide/data.h hands both to
// mg::data::TensorDataset.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <memgrad/memgrad.h>

class SyntheticData {
 public:
  static constexpr int kSide = 8;  // images are kSide x kSide
  static constexpr int kPixels = kSide * kSide;
  static constexpr int kClasses = 10;

  struct Split {
    mg::Tensor images;  // (N, 64) float32, standardised
    mg::Tensor labels;  // (N) int64
  };

  explicit SyntheticData(int64_t train_size = 4096, int64_t test_size = 1024, uint64_t seed = 0) {
    std::mt19937_64 engine(seed);
    std::uniform_int_distribution<int> pixel(0, 255);
    std::vector<std::vector<int>> patterns(kClasses, std::vector<int>(kPixels));
    for (auto& pattern : patterns) std::generate(pattern.begin(), pattern.end(), [&] { return pixel(engine); });
    std::vector<uint8_t> train_pixels, test_pixels;
    std::vector<int64_t> train_labels, test_labels;
    draw(train_size, patterns, engine, train_pixels, train_labels);
    nearest_pattern_accuracy_ = draw(test_size, patterns, engine, test_pixels, test_labels);

    // The training split's statistics normalise both splits: what each grey level becomes.
    std::array<int64_t, 256> counts{};
    for (uint8_t value : train_pixels) ++counts[value];
    double sum = 0, sum_of_squares = 0;
    for (int value = 0; value < 256; ++value) {
      sum += counts[value] * (value / 255.0);
      sum_of_squares += counts[value] * (value / 255.0) * (value / 255.0);
    }
    const double mean = sum / static_cast<double>(train_pixels.size());
    const double std = std::sqrt(sum_of_squares / static_cast<double>(train_pixels.size()) - mean * mean);
    auto normalised = [&](const std::vector<uint8_t>& pixels, int64_t size) {
      std::vector<float> values;
      for (uint8_t value : pixels) values.push_back(static_cast<float>((value / 255.0 - mean) / std));
      return mg::from_vector(values, {size, kPixels});
    };
    train = {normalised(train_pixels, train_size), mg::from_vector(train_labels, {train_size})};
    test = {normalised(test_pixels, test_size), mg::from_vector(test_labels, {test_size})};
  }

  Split train, test;

  // The share of the test split that a classifier knowing the ten patterns gets right by
  // picking the nearest one: about as well as any model can do on this data.
  double nearest_pattern_accuracy() const { return nearest_pattern_accuracy_; }

 private:
  // Appends `size` samples (grey levels) and their labels; returns the share of them
  // nearest to their own class's pattern.
  static double draw(int64_t size, const std::vector<std::vector<int>>& patterns, std::mt19937_64& engine,
                     std::vector<uint8_t>& pixels, std::vector<int64_t>& labels) {
    // NOTE: noise with a standard deviation of 150 grey levels makes the classes overlap,
    // so that no model gets every sample right.
    std::normal_distribution<double> noise(0.0, 150.0);
    std::uniform_int_distribution<int> label(0, kClasses - 1);
    int64_t nearest_own = 0;
    for (int64_t i = 0; i < size; ++i) {
      const int y = label(engine);
      labels.push_back(y);
      std::vector<uint8_t> image;
      for (int value : patterns[y]) image.push_back(static_cast<uint8_t>(std::clamp(value + noise(engine), 0.0, 255.0)));
      pixels.insert(pixels.end(), image.begin(), image.end());
      nearest_own += nearest_pattern(image, patterns) == y;
    }
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

  double nearest_pattern_accuracy_ = 0;
};
