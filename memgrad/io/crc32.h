// io/crc32.h — the CRC-32 that zlib, gzip, PNG and Python's zlib.crc32 compute (reflected
// polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF), so that a checksum
// memgrad writes can be checked by any of them:
//
//   python3 -c "import zlib; print(hex(zlib.crc32(b'123456789')))"   # 0xcbf43926
//
// Checkpoints carry it over their tensor data (io/safetensors.h). Computed 8 bytes at a
// time from 8 tables ("slicing by 8"), about 8 times as fast as the byte-at-a-time table,
// so that checking a large checkpoint costs little beside reading it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mg {

// Accumulates bytes: Crc32 crc; crc.update(a, n); crc.update(b, m); crc.value() is the
// CRC-32 of a followed by b.
class Crc32 {
 public:
  void update(const void* bytes, size_t count);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

// The CRC-32 of `count` bytes at once.
uint32_t crc32(const void* bytes, size_t count);

// The 8 lowercase hex digits of a checksum, as files store it ("cbf43926").
std::string crc32_hex(uint32_t checksum);

}  // namespace mg
