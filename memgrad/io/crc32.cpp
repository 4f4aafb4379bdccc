// io/crc32.cpp — table-driven CRC-32, 8 bytes a step.
#include "memgrad/io/crc32.h"

#include <array>
#include <cstdio>
#include <cstring>

namespace mg {
namespace {

constexpr uint32_t kReflectedPolynomial = 0xEDB88320u;  // zlib's, bit-reversed 0x04C11DB7

// tables[0][b]: the CRC of the single byte b. tables[k][b]: the CRC of b followed by k zero
// bytes, so that 8 input bytes are folded in with 8 independent lookups.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ kReflectedPolynomial : crc >> 1;
    tables[0][byte] = crc;
  }
  for (size_t k = 1; k < tables.size(); ++k) {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const uint32_t previous = tables[k - 1][byte];
      tables[k][byte] = (previous >> 8) ^ tables[0][previous & 0xFFu];
    }
  }
  return tables;
}

constexpr Tables kTables = make_tables();

}  // namespace

void Crc32::update(const void* bytes, size_t count) {
  const auto* next = static_cast<const unsigned char*>(bytes);
  uint32_t crc = state_;
  // NOTE: the 8-byte steps read the bytes one by one (no wide loads), so they are the same
  // on any byte order and alignment; the compiler still keeps them in registers.
  for (; count >= 8; next += 8, count -= 8) {
    const uint32_t low = crc ^ (uint32_t{next[0]} | uint32_t{next[1]} << 8 | uint32_t{next[2]} << 16 |
                                uint32_t{next[3]} << 24);
    crc = kTables[7][low & 0xFFu] ^ kTables[6][(low >> 8) & 0xFFu] ^ kTables[5][(low >> 16) & 0xFFu] ^
          kTables[4][low >> 24] ^ kTables[3][next[4]] ^ kTables[2][next[5]] ^ kTables[1][next[6]] ^
          kTables[0][next[7]];
  }
  for (; count > 0; ++next, --count) crc = (crc >> 8) ^ kTables[0][(crc ^ *next) & 0xFFu];
  state_ = crc;
}

uint32_t crc32(const void* bytes, size_t count) {
  Crc32 crc;
  crc.update(bytes, count);
  return crc.value();
}

std::string crc32_hex(uint32_t checksum) {
  char digits[9];
  std::snprintf(digits, sizeof digits, "%08x", checksum);
  return digits;
}

}  // namespace mg
