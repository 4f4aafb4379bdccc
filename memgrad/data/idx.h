// data/idx.h — reader for IDX files, the format MNIST and Fashion-MNIST ship in.
//
// An IDX file is a 4-byte magic (0, 0, element type code, number of dims), then one
// big-endian uint32 per dim, then the elements, big-endian, row-major. Files may be
// gzipped (recognised by their first bytes, not by their name). The reader validates
// everything and throws mg::Error naming the file, so a damaged download is reported
// instead of crashing a training run. It returns raw bytes in host byte order; turning
// them into a Tensor is the dataset's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mg::data {

// The element type codes defined by the IDX format.
enum class IdxType : uint8_t {
  UnsignedByte = 0x08,
  SignedByte = 0x09,
  Short = 0x0B,    // int16
  Int = 0x0C,      // int32
  Float = 0x0D,    // float32
  Double = 0x0E,   // float64
};

// Bytes per element of `type`.
size_t idx_element_size(IdxType type);
// "ubyte", "sbyte", "short", "int", "float", "double".
const char* idx_type_name(IdxType type);

struct IdxArray {
  IdxType type = IdxType::UnsignedByte;
  std::vector<int64_t> dims;    // e.g. (10000, 28, 28) for an image file
  std::vector<uint8_t> bytes;   // elements in host byte order, row-major

  int64_t element_count() const;
};

// Reads a raw or gzipped IDX file. Throws mg::Error naming `path` if the file is missing,
// unreadable, not IDX, truncated, followed by extra bytes, or a corrupt gzip stream.
IdxArray read_idx(const std::string& path);

// Finds the IDX file for `stem` (e.g. "train-images-idx3-ubyte") in `dir`: tries `stem`,
// `stem.gz`, and the common spelling with a dot before "idx" ("train-images.idx3-ubyte",
// plus ".gz"). Returns the first that exists; throws mg::Error listing every path tried.
std::string find_idx_file(const std::string& dir, const std::string& stem);

}  // namespace mg::data
