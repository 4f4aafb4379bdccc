// tests/fuzz/fuzz_safetensors.cpp — libFuzzer target for the safetensors reader
// (io/safetensors.h): the header's length, its JSON, dtypes, shapes and data offsets
// (overlapping, gapped, beyond the file), BOOL bytes. A file either loads, with tensors
// that exactly fill its data section and the metadata read_safetensors_metadata reads, or
// is refused with an error naming it.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "memgrad/io/safetensors.h"
#include "fuzz_support.h"

namespace {

// The data section's size as the file's first 8 bytes (little-endian) announce it.
uint64_t announced_data_bytes(const uint8_t* data, size_t size) {
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{data[i]} << (8 * i);
  return size - 8 - header_length;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_file("input.safetensors", data, size);
  std::vector<std::pair<std::string, mg::Tensor>> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;
  try {
    metadata = mg::read_safetensors_metadata(path);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, path);
  }
  try {
    tensors = mg::load_safetensors(path);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, path);
    return 0;
  }
  uint64_t tensor_bytes = 0;
  for (const auto& [name, tensor] : tensors) tensor_bytes += tensor.nbytes();
  if (mg::read_safetensors_metadata(path) != metadata || tensor_bytes != announced_data_bytes(data, size)) {
    std::fprintf(stderr, "fuzz: a loaded file's tensors hold %llu bytes of its data section's %llu\n",
                 static_cast<unsigned long long>(tensor_bytes),
                 static_cast<unsigned long long>(announced_data_bytes(data, size)));
    std::abort();
  }
  return 0;
}
