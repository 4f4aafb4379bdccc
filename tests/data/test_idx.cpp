// tests/data/test_idx.cpp — the IDX reader: values round-trip through raw and gzipped
// files, multi-byte elements come back in host order, and every kind of damaged file is
// refused with an mg::Error that names it. Finally, the real Fashion-MNIST test set when
// the dataset-fashion-mnist package is installed.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "memgrad/core/error.h"
#include "memgrad/data/idx.h"

namespace fs = std::filesystem;
using mg::data::find_idx_file;
using mg::data::IdxArray;
using mg::data::IdxType;
using mg::data::read_idx;

namespace {

using Bytes = std::vector<uint8_t>;

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device seed;
    path = fs::temp_directory_path() /
           ("memgrad-test-idx-" + std::to_string(seed()) + "-" + std::to_string(seed()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void append_big_endian_u32(Bytes& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(value >> shift));
}

// Header for `type` and `dims`, followed by `payload` (already big-endian).
Bytes idx_bytes(uint8_t type_code, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, type_code, uint8_t(dims.size())};
  for (uint32_t dim : dims) append_big_endian_u32(out, dim);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(file.good());
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(file, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

Bytes read_whole_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// The message of the mg::Error that read_idx throws for `path`; fails the test otherwise.
std::string read_idx_error(const std::string& path) {
  try {
    read_idx(path);
  } catch (const mg::Error& error) {
    return error.what();
  }
  FAIL("read_idx('" << path << "') did not throw");
  return {};
}

template <class T>
T element_at(const IdxArray& array, size_t index) {
  T value;
  std::memcpy(&value, array.bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

}  // namespace

TEST_CASE("read_idx round-trips ubyte values from raw and gzipped files", "[idx]") {
  TempDir dir;
  Bytes payload;
  for (int i = 0; i < 2 * 3 * 4; ++i) payload.push_back(uint8_t(i * 10 + 1));
  const Bytes file_bytes = idx_bytes(0x08, {2, 3, 4}, payload);

  const bool gzipped = GENERATE(false, true);
  // The name does not say gzip: detection must go by the magic bytes.
  const std::string path = dir.file("images-idx3-ubyte");
  if (gzipped) write_gzip(path, file_bytes); else write_raw(path, file_bytes);
  CAPTURE(gzipped);

  const IdxArray array = read_idx(path);
  CHECK(array.type == IdxType::UnsignedByte);
  CHECK(array.dims == std::vector<int64_t>{2, 3, 4});
  CHECK(array.element_count() == 24);
  CHECK(array.bytes == payload);
}

TEST_CASE("read_idx converts big-endian multi-byte elements to host order", "[idx]") {
  TempDir dir;

  SECTION("int32") {
    // 0x01020304, -2 and INT32_MIN, written big-endian.
    const Bytes payload = {0x01, 0x02, 0x03, 0x04, 0xFF, 0xFF, 0xFF, 0xFE, 0x80, 0, 0, 0};
    write_raw(dir.file("ints"), idx_bytes(0x0C, {3}, payload));
    const IdxArray array = read_idx(dir.file("ints"));
    REQUIRE(array.type == IdxType::Int);
    REQUIRE(array.bytes.size() == 12);
    CHECK(element_at<int32_t>(array, 0) == 0x01020304);
    CHECK(element_at<int32_t>(array, 1) == -2);
    CHECK(element_at<int32_t>(array, 2) == INT32_MIN);
  }
  SECTION("int16, gzipped") {
    const Bytes payload = {0x12, 0x34, 0xFF, 0xFD};
    write_gzip(dir.file("shorts"), idx_bytes(0x0B, {1, 2}, payload));
    const IdxArray array = read_idx(dir.file("shorts"));
    REQUIRE(array.type == IdxType::Short);
    CHECK(array.dims == std::vector<int64_t>{1, 2});
    CHECK(element_at<int16_t>(array, 0) == 0x1234);
    CHECK(element_at<int16_t>(array, 1) == -3);
  }
  SECTION("float32 and float64") {
    // 1.5f = 0x3FC00000; -2.25 = 0xC002000000000000.
    write_raw(dir.file("floats"), idx_bytes(0x0D, {1}, {0x3F, 0xC0, 0x00, 0x00}));
    const IdxArray floats = read_idx(dir.file("floats"));
    REQUIRE(floats.type == IdxType::Float);
    CHECK(element_at<float>(floats, 0) == 1.5f);

    write_raw(dir.file("doubles"), idx_bytes(0x0E, {1}, {0xC0, 0x02, 0, 0, 0, 0, 0, 0}));
    const IdxArray doubles = read_idx(dir.file("doubles"));
    REQUIRE(doubles.type == IdxType::Double);
    CHECK(element_at<double>(doubles, 0) == -2.25);
  }
  SECTION("signed bytes keep their bits") {
    write_raw(dir.file("sbytes"), idx_bytes(0x09, {2}, {0x7F, 0x80}));
    const IdxArray array = read_idx(dir.file("sbytes"));
    REQUIRE(array.type == IdxType::SignedByte);
    CHECK(element_at<int8_t>(array, 0) == 127);
    CHECK(element_at<int8_t>(array, 1) == -128);
  }
}

TEST_CASE("read_idx accepts zero-length dims", "[idx]") {
  TempDir dir;
  write_raw(dir.file("empty-idx2-ubyte"), idx_bytes(0x08, {0, 28}, {}));
  const IdxArray array = read_idx(dir.file("empty-idx2-ubyte"));
  CHECK(array.dims == std::vector<int64_t>{0, 28});
  CHECK(array.bytes.empty());
}

TEST_CASE("read_idx refuses missing and unopenable files with a hint", "[idx]") {
  TempDir dir;

  const std::string missing = dir.file("no-such-idx1-ubyte");
  std::string message = read_idx_error(missing);
  CHECK_THAT(message, Catch::Contains(missing));
  CHECK_THAT(message, Catch::Contains("not found"));
  CHECK_THAT(message, Catch::Contains("dataset-fashion-mnist"));
  CHECK_THAT(message, Catch::Contains("--data DIR"));

  const std::string folder = dir.file("a-folder");
  fs::create_directory(folder);
  message = read_idx_error(folder);
  CHECK_THAT(message, Catch::Contains(folder));
  CHECK_THAT(message, Catch::Contains("directory"));
}

TEST_CASE("read_idx refuses damaged headers, naming the file", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("damaged-idx1-ubyte");
  const bool gzipped = GENERATE(false, true);
  CAPTURE(gzipped);
  auto write = [&](const Bytes& bytes) {
    if (gzipped) write_gzip(path, bytes); else write_raw(path, bytes);
  };
  auto expect_error = [&](const char* expected_phrase) {
    const std::string message = read_idx_error(path);
    CAPTURE(message);
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains(expected_phrase));
  };

  SECTION("empty file") {
    write({});
    expect_error("truncated header");
  }
  SECTION("magic cut short") {
    write({0, 0, 0x08});
    expect_error("truncated header");
  }
  SECTION("first two bytes not zero") {
    write({0x50, 0x4B, 0x03, 0x04, 0, 0, 0, 1, 7});  // a zip file, say
    expect_error("bad magic");
  }
  SECTION("a text file") {
    write({'h', 'e', 'l', 'l', 'o', '\n'});
    expect_error("bad magic");
  }
  SECTION("unknown type code") {
    write(idx_bytes(0x0A, {1}, {0}));
    expect_error("unknown element type code 0x0A");
  }
  SECTION("zero dims") {
    write({0, 0, 0x08, 0});
    expect_error("0 dims");
  }
  SECTION("five dims") {
    write(idx_bytes(0x08, {1, 1, 1, 1, 1}, {9}));
    expect_error("5 dims");
  }
  SECTION("dims cut short") {
    Bytes bytes = idx_bytes(0x08, {2, 3, 4}, {});
    bytes.resize(bytes.size() - 2);  // the last dim loses two of its bytes
    write(bytes);
    expect_error("truncated header");
  }
  SECTION("dims whose byte count overflows") {
    write(idx_bytes(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {1, 2, 3}));
    expect_error("more than 2^63 bytes");
  }
}

TEST_CASE("read_idx refuses data that does not match the dims", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("labels-idx1-ubyte");
  const bool gzipped = GENERATE(false, true);
  CAPTURE(gzipped);
  auto write = [&](const Bytes& bytes) {
    if (gzipped) write_gzip(path, bytes); else write_raw(path, bytes);
  };

  SECTION("truncated data") {
    write(idx_bytes(0x0C, {2, 3}, Bytes(23, 1)));  // 6 ints need 24 bytes
    const std::string message = read_idx_error(path);
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("truncated"));
    CHECK_THAT(message, Catch::Contains("2x3"));
    CHECK_THAT(message, Catch::Contains("24 bytes"));
  }
  SECTION("huge dims in a tiny file fail as truncated without allocating them") {
    write(idx_bytes(0x0E, {0x7FFFFFFF, 0x10000}, Bytes(64, 1)));  // 2^50 bytes announced
    const std::string message = read_idx_error(path);
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("truncated"));
  }
  SECTION("trailing bytes") {
    write(idx_bytes(0x08, {4}, {1, 2, 3, 4, 5, 6, 7}));
    const std::string message = read_idx_error(path);
    CHECK_THAT(message, Catch::Contains(path));
    CHECK_THAT(message, Catch::Contains("3 bytes after the end of its data"));
  }
}

TEST_CASE("read_idx refuses corrupt gzip files", "[idx]") {
  TempDir dir;
  Bytes payload(1000);
  std::mt19937 random(7);
  for (auto& byte : payload) byte = uint8_t(random());  // incompressible, so the stream is long
  const Bytes file_bytes = idx_bytes(0x08, {1000}, payload);
  const std::string good = dir.file("good-idx1-ubyte.gz");
  write_gzip(good, file_bytes);
  const Bytes gzip_bytes = read_whole_file(good);
  REQUIRE(gzip_bytes.size() > 100);
  REQUIRE(read_idx(good).bytes == payload);

  const std::string path = dir.file("bad-idx1-ubyte.gz");
  SECTION("cut off halfway") {
    write_raw(path, Bytes(gzip_bytes.begin(), gzip_bytes.begin() + gzip_bytes.size() / 2));
  }
  SECTION("only the gzip magic") {
    write_raw(path, {0x1f, 0x8b});
  }
  SECTION("garbage after the gzip magic") {
    write_raw(path, {0x1f, 0x8b, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42});
  }
  SECTION("deflate data overwritten") {
    Bytes damaged = gzip_bytes;
    for (size_t i = 20; i < 60; ++i) damaged[i] = 0xFF;
    write_raw(path, damaged);
  }
  SECTION("checksum overwritten") {
    Bytes damaged = gzip_bytes;
    damaged[damaged.size() - 6] ^= 0xFF;  // inside the CRC-32 of the trailer
    write_raw(path, damaged);
  }
  const std::string message = read_idx_error(path);
  CAPTURE(message);
  CHECK_THAT(message, Catch::Contains(path));
  CHECK_THAT(message, Catch::Contains("gzip"));
}

TEST_CASE("find_idx_file finds the plain, gzipped and dotted spellings", "[idx]") {
  TempDir dir;
  const std::string stem = "train-images-idx3-ubyte";
  const Bytes bytes = idx_bytes(0x08, {1}, {5});

  SECTION("plain") {
    write_raw(dir.file(stem), bytes);
    CHECK(find_idx_file(dir.path.string(), stem) == dir.file(stem));
  }
  SECTION("gzipped") {
    write_gzip(dir.file(stem + ".gz"), bytes);
    CHECK(find_idx_file(dir.path.string(), stem) == dir.file(stem + ".gz"));
  }
  SECTION("dotted") {
    write_raw(dir.file("train-images.idx3-ubyte"), bytes);
    CHECK(find_idx_file(dir.path.string(), stem) == dir.file("train-images.idx3-ubyte"));
  }
  SECTION("dotted and gzipped") {
    write_gzip(dir.file("train-images.idx3-ubyte.gz"), bytes);
    const std::string found = find_idx_file(dir.path.string(), stem);
    CHECK(found == dir.file("train-images.idx3-ubyte.gz"));
    CHECK(read_idx(found).bytes == Bytes{5});
  }
  SECTION("the plain file wins over the gzipped one") {
    write_raw(dir.file(stem), bytes);
    write_gzip(dir.file(stem + ".gz"), bytes);
    CHECK(find_idx_file(dir.path.string(), stem) == dir.file(stem));
  }
  SECTION("missing: the error lists every path tried") {
    fs::create_directory(dir.file(stem));  // a folder of that name is not a file
    std::string message;
    try {
      find_idx_file(dir.path.string(), stem);
    } catch (const mg::Error& error) {
      message = error.what();
    }
    CAPTURE(message);
    for (const char* name : {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                             "train-images.idx3-ubyte", "train-images.idx3-ubyte.gz"})
      CHECK_THAT(message, Catch::Contains(dir.file(name)));
    CHECK_THAT(message, Catch::Contains("dataset-fashion-mnist"));
  }
  SECTION("missing folder") {
    const std::string nowhere = dir.file("nowhere");
    CHECK_THROWS_WITH(find_idx_file(nowhere, stem),
                      Catch::Contains(nowhere) && Catch::Contains("does not exist"));
  }
}

TEST_CASE("read_idx reads the installed Fashion-MNIST test set", "[idx]") {
  const std::string dataset_dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dataset_dir)) {
    WARN("skipped: " << dataset_dir << " is absent (apt-get install dataset-fashion-mnist)");
    return;
  }

  const IdxArray labels = read_idx(find_idx_file(dataset_dir, "t10k-labels-idx1-ubyte"));
  CHECK(labels.type == IdxType::UnsignedByte);
  REQUIRE(labels.dims == std::vector<int64_t>{10000});
  REQUIRE(labels.bytes.size() == 10000);
  int count_per_class[10] = {};
  for (uint8_t label : labels.bytes) {
    REQUIRE(label < 10);
    ++count_per_class[label];
  }
  for (int count : count_per_class) CHECK(count == 1000);  // the test set is balanced

  const IdxArray images = read_idx(find_idx_file(dataset_dir, "t10k-images-idx3-ubyte"));
  CHECK(images.type == IdxType::UnsignedByte);
  REQUIRE(images.dims == std::vector<int64_t>{10000, 28, 28});
  REQUIRE(images.bytes.size() == 10000u * 28 * 28);
  // Real pictures: not all black, and they use the full range of grey.
  CHECK(*std::max_element(images.bytes.begin(), images.bytes.end()) == 255);
  CHECK(*std::min_element(images.bytes.begin(), images.bytes.end()) == 0);
}
