// tests/io/test_safetensors.cpp — safetensors I/O: round trips of every dtype, exact bytes
// of a small file, rejection of corrupt files (naming the file), atomic saving, and the
// data checksum (written, checked, optional).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "memgrad/core/factory.h"
#include "memgrad/io/crc32.h"
#include "memgrad/io/safetensors.h"

namespace {

namespace fs = std::filesystem;
using mg::DType;
using mg::Tensor;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A fresh directory under the system's temporary one, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("mg_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string length_prefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return bytes;
}

// A file with `header` (padded as the reference pads it) and `data`.
std::string make_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return length_prefix(header.size()) + header + data;
}

// Random non-zero values, so a tensor left unwritten cannot pass for a loaded one.
template <class T>
std::vector<T> random_values(size_t count, std::mt19937& engine) {
  std::vector<T> values;
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      values.push_back(i == 0 || engine() % 2 == 1);
    } else if constexpr (std::is_integral_v<T>) {
      T value = static_cast<T>(engine());
      values.push_back(value == 0 ? T(1) : value);
    } else {
      float magnitude = std::uniform_real_distribution<float>(0.5f, 100.0f)(engine);
      values.push_back(T(engine() % 2 ? magnitude : -magnitude));
    }
  }
  return values;
}

// Same values bit for bit (Half and BFloat16 compare through their bits).
template <class T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_same_v<T, mg::Half> || std::is_same_v<T, mg::BFloat16>) {
      if (a[i].bits != b[i].bits) return false;
    } else if (a[i] != b[i]) {
      return false;
    }
  }
  return true;
}

template <class T>
void check_round_trip(const TempDir& dir, std::mt19937& engine) {
  std::vector<T> values = random_values<T>(12, engine);
  Tensor original = mg::from_vector(values, {3, 4});
  std::string path = dir.file("roundtrip.safetensors");
  mg::save_safetensors(path, {{"x", original}});
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].first == "x");
  CHECK(loaded[0].second.dtype() == mg::dtype_of<T>);
  CHECK(loaded[0].second.sizes() == mg::Shape{3, 4});
  CHECK(loaded[0].second.memory_category() == mg::MemoryCategory::Temporary);
  CHECK(same_values(loaded[0].second.to_vector<T>(), values));
}

// A good two-tensor file: "a" F32 [2] = {1, 2} and "b" I64 [1] = {7}.
std::string good_file() {
  return make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})",
                   std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8) +
                       std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8));
}

// Loading `bytes` must throw mg::Error naming the file (and, when given, `expected`).
void check_rejected(const TempDir& dir, const std::string& bytes, const std::string& expected = "") {
  std::string path = dir.file("corrupt.safetensors");
  write_bytes(path, bytes);
  INFO("file bytes: " << bytes.size());
  try {
    mg::load_safetensors(path);
    FAIL("a corrupt file was accepted");
  } catch (const mg::Error& error) {
    std::string message = error.what();
    INFO(message);
    CHECK(message.find(path) != std::string::npos);
    if (!expected.empty()) CHECK(message.find(expected) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("safetensors round-trips every dtype bit for bit", "[safetensors]") {
  TempDir dir;
  std::mt19937 engine(1234);
  check_round_trip<float>(dir, engine);
  check_round_trip<double>(dir, engine);
  check_round_trip<mg::Half>(dir, engine);
  check_round_trip<mg::BFloat16>(dir, engine);
  check_round_trip<int64_t>(dir, engine);
  check_round_trip<int32_t>(dir, engine);
  check_round_trip<uint8_t>(dir, engine);
  check_round_trip<bool>(dir, engine);
}

TEST_CASE("safetensors keeps 0-d, empty and several tensors with their names", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("mixed.safetensors");
  Tensor scalar = mg::full({}, 3.5, {.dtype = DType::Float64});
  Tensor empty = mg::empty({0, 3}, {.dtype = DType::Int32});
  Tensor vector = mg::from_vector(std::vector<float>{-1.5f, 2.25f});
  mg::save_safetensors(path, {{"z.scalar", scalar}, {"a.empty", empty}, {"m.vector", vector}});
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 3);
  // Written (and so read back) in name order, as the reference implementation writes them.
  CHECK(loaded[0].first == "a.empty");
  CHECK(loaded[0].second.sizes() == mg::Shape{0, 3});
  CHECK(loaded[0].second.dtype() == DType::Int32);
  CHECK(loaded[1].first == "m.vector");
  CHECK(loaded[1].second.to_vector<float>() == std::vector<float>{-1.5f, 2.25f});
  CHECK(loaded[2].first == "z.scalar");
  CHECK(loaded[2].second.dim() == 0);
  CHECK(loaded[2].second.item<double>() == 3.5);
}

TEST_CASE("safetensors saves a non-contiguous view's logical values", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("view.safetensors");
  Tensor base = mg::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor transposed = base.t();
  REQUIRE_FALSE(transposed.is_contiguous());
  mg::save_safetensors(path, {{"t", transposed}});
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].second.sizes() == mg::Shape{3, 2});
  CHECK(loaded[0].second.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("safetensors metadata round-trips, escapes included", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("meta.safetensors");
  std::vector<std::pair<std::string, std::string>> metadata = {
      {"format", "pt"}, {"note", "quote \" backslash \\ newline \n tab \t \x01 caf\xc3\xa9"}};
  mg::save_safetensors(path, {{"w", mg::ones({2})}}, metadata);
  CHECK(mg::read_safetensors_metadata(path) == metadata);
  CHECK(mg::load_safetensors(path).size() == 1);

  mg::save_safetensors(path, {{"w", mg::ones({2})}});
  CHECK(mg::read_safetensors_metadata(path).empty());
}

TEST_CASE("safetensors writes the bytes the reference implementation writes", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("tiny.safetensors");
  Tensor a = mg::from_vector(std::vector<float>{1.0f, 2.0f});
  const std::string values("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);

  // 54 bytes of JSON, padded with 2 spaces to 56 = 0x38.
  mg::save_safetensors(path, {{"a", a}});
  CHECK(read_bytes(path) == std::string("\x38\x00\x00\x00\x00\x00\x00\x00", 8) +
                                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})" "  " + values);

  // With metadata (first, as the reference writes it): 85 bytes, padded with 3 to 88 = 0x58.
  mg::save_safetensors(path, {{"a", a}}, {{"format", "pt"}});
  CHECK(read_bytes(path) ==
        std::string("\x58\x00\x00\x00\x00\x00\x00\x00", 8) +
            R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"
            "   " + values);
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("safetensors reads a file with an escaped name and extra whitespace", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("escaped.safetensors");
  write_bytes(path, make_file("{ \"caf\\u00e9\\ud83d\\ude00\" : { \"dtype\" : \"U8\", \"shape\" : [ 1 ] ,"
                              " \"data_offsets\" : [ 0 , 1 ] } }\n",
                              "\x05"));
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].first == "caf\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(loaded[0].second.to_vector<uint8_t>() == std::vector<uint8_t>{5});
}

TEST_CASE("safetensors rejects truncated files, naming them", "[safetensors]") {
  TempDir dir;
  const std::string good = good_file();
  mg::load_safetensors((write_bytes(dir.file("good.safetensors"), good), dir.file("good.safetensors")));
  const size_t header_end = good.size() - 16;
  for (size_t size : {size_t{0}, size_t{3}, size_t{7}, size_t{8}, size_t{20}, header_end - 1,
                      header_end, header_end + 5, good.size() - 1}) {
    INFO("truncated to " << size << " bytes");
    check_rejected(dir, good.substr(0, size));
  }
  check_rejected(dir, good + "x", "after the header");  // trailing bytes nobody accounts for
  check_rejected(dir, "", "too short");
}

TEST_CASE("safetensors rejects a bad header length", "[safetensors]") {
  TempDir dir;
  const std::string good = good_file();
  const std::string header_and_data = good.substr(8);
  check_rejected(dir, length_prefix(good.size()) + header_and_data, "beyond the end");
  check_rejected(dir, length_prefix(~uint64_t{0}) + header_and_data, "beyond the end");
  check_rejected(dir, length_prefix(0) + header_and_data, "does not start with '{'");
  check_rejected(dir, length_prefix(9) + header_and_data, "malformed JSON");
}

TEST_CASE("safetensors rejects malformed JSON headers", "[safetensors]") {
  TempDir dir;
  const std::string data(16, '\x01');
  for (const char* header : {
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]};"b":1})",
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8])",
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)",
           R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
           R"({"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})",
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999]}})",
           R"({"a":{"dtype":"F32","shape":true,"data_offsets":[0,8]}})",
           R"({"a\q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           R"({"\ud800":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],}})",
           "{\"a\x01\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
           "{\"a",
       }) {
    INFO(header);
    check_rejected(dir, make_file(header, data.substr(0, 8)), "malformed JSON");
  }
  // Deep nesting is refused, not followed down until the stack runs out.
  check_rejected(dir, make_file("{\"a\":" + std::string(100000, '['), ""), "nested deeper");
}

TEST_CASE("safetensors rejects headers that do not describe the data", "[safetensors]") {
  TempDir dir;
  const std::string data8(8, '\x01');
  const std::string data16(16, '\x01');
  SECTION("unknown dtype") {
    check_rejected(dir, make_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", data8),
                   "unknown dtype \"F31\"");
  }
  SECTION("shape and offsets disagree") {
    check_rejected(dir, make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
                   "needs 12 bytes");
    check_rejected(dir, make_file(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", data8),
                   "needs 16 bytes");
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
                             data8),
                   "needs more than 2^64");
  }
  SECTION("overlapping, gapped and out-of-range offsets") {
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             std::string(12, '\x01')),
                   "overlap");
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             data16),
                   "gap");
    check_rejected(dir, make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
                   "truncated");
    check_rejected(dir, make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8),
                   "end before they begin");
    check_rejected(dir, make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data8),
                   "non-negative");
  }
  SECTION("duplicate names, missing and unexpected keys") {
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             data8),
                   "appears twice");
    check_rejected(dir, make_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", data8),
                   "\"shape\" is missing");
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":"y"}})", data8),
                   "unexpected key");
    check_rejected(dir, make_file(R"({"a":[1,2]})", data8), "expected an object");
    check_rejected(dir, make_file(R"({"__metadata__":{"k":1}})", ""), "expected a string");
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}})",
                             data8),
                   "at most");
  }
  SECTION("an empty tensor whose other sizes overflow its strides") {
    // Found for tests/fuzz/fuzz_safetensors.cpp: these reached Shape::numel and
    // contiguous_strides, whose int64 products overflowed (undefined behaviour).
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", ""),
                   "has no elements");
    check_rejected(dir,
                   make_file(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", ""),
                   "has no elements");
    // Large sizes beside a zero are fine while they multiply within int64.
    std::string path = dir.file("empty.safetensors");
    write_bytes(path, make_file(R"({"a":{"dtype":"F32","shape":[0,4294967296,2147483647],"data_offsets":[0,0]}})", ""));
    NamedTensors loaded = mg::load_safetensors(path);
    REQUIRE(loaded.size() == 1);
    CHECK(loaded[0].second.sizes() == mg::Shape{0, 4294967296, 2147483647});
    CHECK(loaded[0].second.numel() == 0);
  }
  SECTION("booleans other than 0 and 1") {
    check_rejected(dir, make_file(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
                   "BOOL");
  }
  SECTION("edits of a good file's bytes") {
    std::string good = good_file();
    std::string wrong_dtype = good;
    wrong_dtype.replace(wrong_dtype.find("F32"), 3, "F33");
    check_rejected(dir, wrong_dtype, "unknown dtype");
    std::string wrong_offsets = good;
    wrong_offsets.replace(wrong_offsets.find("[0,8]"), 5, "[0,4]");
    check_rejected(dir, wrong_offsets, "needs 8 bytes");
    std::string bad_json = good;
    bad_json[bad_json.find(':')] = ';';
    check_rejected(dir, bad_json, "malformed JSON");
  }
}

TEST_CASE("safetensors reports a missing file by name", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("missing.safetensors");
  CHECK_THROWS_WITH(mg::load_safetensors(path), Catch::Contains(path));
  CHECK_THROWS_WITH(mg::read_safetensors_metadata(path), Catch::Contains(path));
}

TEST_CASE("safetensors saves atomically: a failed save leaves no trace", "[safetensors]") {
  TempDir dir;
  Tensor w = mg::from_vector(std::vector<float>{1, 2, 3});

  SECTION("into a directory that does not exist") {
    std::string path = dir.file("no_such_dir") + "/model.safetensors";
    CHECK_THROWS_WITH(mg::save_safetensors(path, {{"w", w}}), Catch::Contains(path));
    CHECK_FALSE(fs::exists(dir.file("no_such_dir")));
  }
  SECTION("a duplicated name keeps the earlier file byte for byte") {
    std::string path = dir.file("model.safetensors");
    mg::save_safetensors(path, {{"w", w}});
    const std::string before = read_bytes(path);
    CHECK_THROWS_WITH(mg::save_safetensors(path, {{"w", w}, {"v", w}, {"w", w}}),
                      Catch::Contains("\"w\" is given twice"));
    CHECK(read_bytes(path) == before);
    CHECK_FALSE(fs::exists(path + ".tmp"));
  }
  SECTION("a rename that fails removes the temporary file") {
    // A non-empty directory at the path: the data is written, then the rename is refused.
    std::string path = dir.file("occupied");
    fs::create_directories(path + "/inside");
    CHECK_THROWS_WITH(mg::save_safetensors(path, {{"w", w}}), Catch::Contains("rename"));
    CHECK(fs::is_directory(path + "/inside"));
    CHECK_FALSE(fs::exists(path + ".tmp"));
  }
  SECTION("the reserved name and undefined tensors are refused before anything is written") {
    std::string path = dir.file("model.safetensors");
    CHECK_THROWS_WITH(mg::save_safetensors(path, {{"__metadata__", w}}), Catch::Contains("reserved"));
    CHECK_THROWS_WITH(mg::save_safetensors(path, {{"w", Tensor()}}), Catch::Contains("undefined"));
    CHECK_FALSE(fs::exists(path));
    CHECK_FALSE(fs::exists(path + ".tmp"));
  }
}

TEST_CASE("safetensors with a checksum: it is written, checked on load, and hidden from the metadata",
          "[safetensors][crc32]") {
  TempDir dir;
  const std::string path = dir.file("checked.safetensors");
  const Tensor a = mg::from_vector(std::vector<float>{1.0f, 2.0f});
  const Tensor b = mg::from_vector(std::vector<int64_t>{7});
  mg::save_safetensors(path, {{"b", b}, {"a", a}}, {{"format", "pt"}}, mg::Checksum::Crc32);

  // The CRC-32 of the data section (a's 8 bytes, then b's: sorted by name), as zlib.crc32
  // computes it, recorded as a string after the caller's pairs.
  const std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8) +
                           std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8);
  const std::string bytes = read_bytes(path);
  CHECK(bytes.substr(bytes.size() - data.size()) == data);
  const std::string recorded = "\"memgrad_crc32\":\"" + mg::crc32_hex(mg::crc32(data.data(), data.size())) + "\"";
  CHECK_THAT(bytes, Catch::Contains(R"({"__metadata__":{"format":"pt",)" + recorded + "}"));
  CHECK(mg::read_safetensors_metadata(path) == std::vector<std::pair<std::string, std::string>>{{"format", "pt"}});
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 2);
  CHECK(loaded[0].second.to_vector<float>() == std::vector<float>{1.0f, 2.0f});

  SECTION("one flipped bit in the data is refused, naming the file and both checksums") {
    std::string damaged = bytes;
    damaged[damaged.size() - 12] ^= 0x04;  // inside a's second float
    const std::string damaged_path = dir.file("damaged.safetensors");
    write_bytes(damaged_path, damaged);
    const std::string saved = mg::crc32_hex(mg::crc32(data.data(), data.size()));
    const std::string found = mg::crc32_hex(mg::crc32(damaged.data() + damaged.size() - 16, 16));
    CHECK_THROWS_MATCHES(mg::load_safetensors(damaged_path), mg::Error,
                         Catch::Matchers::Message(
                             "safetensors file '" + damaged_path + "' is damaged: its tensor data has checksum "
                             "(CRC-32) " + found + " but the file records " + saved + " (__metadata__ "
                             "\"memgrad_crc32\"), so its bytes changed after it was written. Hint: a disk, copy or "
                             "transfer error, or an edit; use an earlier checkpoint, or copy the file again from "
                             "where it was written"));
  }
  SECTION("a checksum that is not 8 hex digits is refused") {
    const std::string bad = dir.file("bad.safetensors");
    write_bytes(bad, make_file(R"({"__metadata__":{"memgrad_crc32":"12345"},)"
                               R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                               "\x05"));
    CHECK_THROWS_WITH(mg::read_safetensors_metadata(bad), Catch::Contains(bad) && Catch::Contains("8 hex digits"));
  }
  SECTION("a caller may not write the key itself") {
    CHECK_THROWS_WITH(mg::save_safetensors(dir.file("x.safetensors"), {{"a", a}}, {{"memgrad_crc32", "00000000"}}),
                      Catch::Contains("the format's own"));
  }
}

TEST_CASE("safetensors without a checksum (PyTorch's, older memgrad's) loads unchecked", "[safetensors][crc32]") {
  TempDir dir;
  const std::string path = dir.file("plain.safetensors");
  std::string file = good_file();
  file[file.size() - 1] = '\x01';  // any data is taken as it is: nothing records what it was
  write_bytes(path, file);
  NamedTensors loaded = mg::load_safetensors(path);
  REQUIRE(loaded.size() == 2);
  CHECK(loaded[1].second.to_vector<int64_t>() == std::vector<int64_t>{7 + (int64_t{1} << 56)});
}
