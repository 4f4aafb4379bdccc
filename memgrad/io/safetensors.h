// io/safetensors.h — reading and writing tensors in the Hugging Face safetensors format.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
// bytes back to back:
//   {"__metadata__": {"format": "pt"},
//    "fc.weight": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}, ...}
// The files memgrad writes are the ones the reference implementation writes (keys sorted,
// header padded with spaces to a multiple of 8), so PyTorch and others read them directly.
//
// Saving writes `path + ".tmp"`, syncs it to disk and renames it over `path`: a failed or
// interrupted save leaves an earlier file at `path` as it was. Loading checks the whole
// header (dtypes, shapes against byte ranges, ranges that tile the data exactly) before it
// reads a byte of data, and reports a corrupt file as mg::Error naming it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

// Writes `tensors` (any device, any strides: their logical values are saved) under their
// names, which must be distinct, and `metadata` (string pairs) under "__metadata__".
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata = {});

// The tensors of a safetensors file, in the header's order, as new TEMPORARY tensors on
// `device` (read into host memory first).
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             Device device = Device::cpu());

// The "__metadata__" pairs of a file (empty when it has none); reads and checks only the header.
std::vector<std::pair<std::string, std::string>> read_safetensors_metadata(const std::string& path);

}  // namespace mg
