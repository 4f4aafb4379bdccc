// tests/io/test_crc32.cpp — our CRC-32 is zlib's: the standard check value, values
// computed with Python's zlib.crc32, and any split of the bytes into updates gives the
// whole's checksum (the 8-byte steps and the byte tail agree).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "memgrad/io/crc32.h"

TEST_CASE("crc32 is zlib's CRC-32", "[crc32]") {
  const std::string check = "123456789";
  CHECK(mg::crc32(check.data(), check.size()) == 0xCBF43926u);  // the catalogue's check value
  CHECK(mg::crc32(nullptr, 0) == 0u);
  // python3 -c "import zlib; print(hex(zlib.crc32(b'The quick brown fox jumps over the lazy dog')))"
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  CHECK(mg::crc32(fox.data(), fox.size()) == 0x414FA339u);
  // python3 -c "import zlib; print(hex(zlib.crc32(bytes(range(256)) * 4)))"
  std::vector<unsigned char> counting;
  for (int i = 0; i < 1024; ++i) counting.push_back(static_cast<unsigned char>(i));
  CHECK(mg::crc32(counting.data(), counting.size()) == 0xB70B4C26u);
  CHECK(mg::crc32_hex(0xCBF43926u) == "cbf43926");
  CHECK(mg::crc32_hex(0x0000ABCDu) == "0000abcd");
}

TEST_CASE("crc32 of bytes fed in pieces is the crc32 of the whole", "[crc32]") {
  std::mt19937 engine(7);
  std::vector<unsigned char> bytes(1000);
  for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(engine());
  const uint32_t whole = mg::crc32(bytes.data(), bytes.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{13}, size_t{999}, size_t{1000}}) {
    mg::Crc32 pieces;
    pieces.update(bytes.data(), split);
    pieces.update(bytes.data() + split, bytes.size() - split);
    INFO("split at " << split);
    CHECK(pieces.value() == whole);
  }
  // One flipped bit changes it.
  bytes[500] ^= 0x10;
  CHECK(mg::crc32(bytes.data(), bytes.size()) != whole);
}
