// tests/fuzz/fuzz_idx.cpp — libFuzzer target for read_idx (data/idx.h). Each input is read
// as it is (a raw IDX file, or a gzip stream when it starts with gzip's magic, as the
// seeds' .gz files do) and once more gzipped by this target, so that the gzip path sees
// well-formed streams of damaged IDX data too; both reads must agree.
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "memgrad/data/idx.h"
#include "fuzz_support.h"

namespace {

// The IDX array in `path`, or nothing when read_idx refuses it (with an error naming it).
std::optional<mg::data::IdxArray> read_or_refuse(const std::string& path) {
  try {
    return mg::data::read_idx(path);
  } catch (const mg::Error& error) {
    fuzz::refuse_unless_named(error, path);
    return std::nullopt;
  }
}

std::string write_gzipped(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (fuzz::scratch_folder() / name).string();
  std::filesystem::remove(path);  // a new file: see fuzz::write_file
  gzFile file = gzopen(path.c_str(), "wb1");
  const bool written = file != nullptr && (size == 0 || gzwrite(file, data, static_cast<unsigned>(size)) > 0);
  if (file == nullptr || gzclose(file) != Z_OK || !written) {
    std::fprintf(stderr, "fuzz: cannot write the gzipped input to '%s'\n", path.c_str());
    std::abort();
  }
  return path;
}

bool same(const mg::data::IdxArray& a, const mg::data::IdxArray& b) {
  return a.type == b.type && a.dims == b.dims && a.bytes == b.bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto raw = read_or_refuse(fuzz::write_file("input-idx1-ubyte", data, size));
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;  // already read as gzip
  const auto gzipped = read_or_refuse(write_gzipped("input-idx1-ubyte.gz", data, size));
  if (raw.has_value() != gzipped.has_value() || (raw && !same(*raw, *gzipped))) {
    std::fprintf(stderr, "fuzz: the raw file was %s, its gzipped copy %s\n", raw ? "read" : "refused",
                 gzipped ? (raw ? "read differently" : "read") : "refused");
    std::abort();
  }
  return 0;
}
