// io/safetensors.h — reading and writing tensors in the Hugging Face safetensors format.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
// bytes back to back:
//   {"__metadata__": {"format": "pt"},
//    "fc.weight": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}, ...}
// The files memgrad writes are the ones the reference implementation writes (keys sorted,
// header padded with spaces to a multiple of 8), so PyTorch and others read them directly.
//
// Saving writes `path + ".tmp"`, syncs it to disk, renames it over `path` and syncs the
// directory: a failed or interrupted save (even a SIGKILL or a power cut) leaves an
// earlier file at `path` as it was, and at worst a stale `path + ".tmp"`, which the next
// save to `path` replaces. NOTE: the temporary name does not end in ".safetensors", so a
// glob for checkpoints (`*.safetensors`) never picks it up; it is refused as incomplete if
// loaded by name while the save is under way. Loading checks the whole header (dtypes,
// shapes against byte ranges, ranges that tile the data exactly) before it reads a byte of
// data, and reports a corrupt file as mg::Error naming it.
//
// Checksums: saved with Checksum::Crc32 (as mg::save_checkpoint saves), the file's
// __metadata__ also holds "memgrad_crc32": the CRC-32 (zlib's, io/crc32.h) of the data
// section (every byte after the header), 8 lowercase hex digits, a string as the format
// requires. load_safetensors checks it when a file has it and refuses a file whose data
// changed, naming both checksums; files without it (written by PyTorch, by other tools, or
// by memgrad before 2026-12-07) load as before. The key is the format's own: it is not
// among the metadata read_safetensors_metadata returns, and a caller may not pass it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memgrad/core/tensor.h"

namespace mg {

// What a saved file carries for its reader to check its data against.
enum class Checksum { None, Crc32 };

// The __metadata__ key of the data section's CRC-32.
inline constexpr const char* kCrc32MetadataKey = "memgrad_crc32";

// Writes `tensors` (any device, any strides: their logical values are saved) under their
// names, which must be distinct, and `metadata` (string pairs) under "__metadata__", with
// the data's checksum when `checksum` asks for one.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata = {},
                      Checksum checksum = Checksum::None);

// The tensors of a safetensors file, in the header's order, as new TEMPORARY tensors on
// `device` (read into host memory first). Checks the data's checksum when the file has one.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             Device device = Device::cpu());

// The "__metadata__" pairs of a file (empty when it has none), without the checksum;
// reads and checks only the header.
std::vector<std::pair<std::string, std::string>> read_safetensors_metadata(const std::string& path);

}  // namespace mg
