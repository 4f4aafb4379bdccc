// tests/data/mnist_test_files.h — small MNIST-format folders for tests: a temporary folder
// that removes itself, and uncompressed IDX files written byte by byte (so the tests do
// not depend on the writer they would be checking).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mg_test {

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    std::random_device seed;
    path = std::filesystem::temp_directory_path() /
           ("memgrad-test-" + tag + "-" + std::to_string(seed()) + "-" + std::to_string(seed()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// An IDX file of unsigned bytes: magic (0, 0, 0x08, rank), big-endian dims, the values.
inline void write_ubyte_idx(const std::string& path, const std::vector<uint32_t>& dims,
                            const std::vector<uint8_t>& values) {
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(dim >> shift));
  }
  bytes.insert(bytes.end(), values.begin(), values.end());
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file.good()) throw std::runtime_error("cannot write " + path);
}

// `prefix`-images-idx3-ubyte (N, rows, cols) and `prefix`-labels-idx1-ubyte (N) in `dir`;
// prefix is "train" or "t10k".
inline void write_mnist_split(const TempDir& dir, const std::string& prefix, uint32_t rows,
                              uint32_t cols, const std::vector<uint8_t>& pixels,
                              const std::vector<uint8_t>& labels) {
  write_ubyte_idx(dir.file(prefix + "-images-idx3-ubyte"),
                  {static_cast<uint32_t>(labels.size()), rows, cols}, pixels);
  write_ubyte_idx(dir.file(prefix + "-labels-idx1-ubyte"), {static_cast<uint32_t>(labels.size())},
                  labels);
}

}  // namespace mg_test
