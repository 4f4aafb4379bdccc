// data/idx.cpp — reads raw and gzipped IDX files (see idx.h), validating every field.
//
// The data is read in bounded chunks rather than into a buffer sized from the header, so
// a corrupt header that claims terabytes fails as "truncated" instead of allocating them.
#include "memgrad/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include "memgrad/core/error.h"

namespace mg::data {
namespace {

constexpr const char* kDatasetHint =
    " Hint: install the Debian package dataset-fashion-mnist (it puts the files in "
    "/usr/share/datasets/fashion-mnist), or pass --data DIR naming a folder that holds "
    "the MNIST-format files.";

constexpr size_t kReadChunkBytes = size_t{1} << 20;

bool is_known_type_code(uint8_t code) {
  switch (code) {
    case 0x08: case 0x09: case 0x0B: case 0x0C: case 0x0D: case 0x0E: return true;
    default: return false;
  }
}

std::string hex_byte(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(value));
  return text;
}

std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::ostringstream text;
  for (size_t i = 0; i < dims.size(); ++i) text << (i ? "x" : "") << dims[i];
  return text.str();
}

// One reading interface over a raw file (stdio) or a gzip stream (zlib), chosen by the
// file's first two bytes. The handles are unique_ptrs so that they close on every path,
// including a throw from the constructor (which skips the destructor).
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    MG_CHECK(std::filesystem::exists(status), "IDX file '", path, "' not found.",
             kDatasetHint);
    MG_CHECK(!std::filesystem::is_directory(status), "IDX file '", path,
             "' is a directory, not a file.", kDatasetHint);

    raw_file_.reset(std::fopen(path.c_str(), "rb"));
    MG_CHECK(raw_file_ != nullptr, "cannot open IDX file '", path, "': ",
             std::strerror(errno), ".", kDatasetHint);
    unsigned char first_bytes[2] = {0, 0};
    const size_t peeked = std::fread(first_bytes, 1, 2, raw_file_.get());
    check_raw_stream();
    if (peeked == 2 && first_bytes[0] == 0x1f && first_bytes[1] == 0x8b) {
      raw_file_.reset();
      gzip_file_.reset(gzopen(path.c_str(), "rb"));
      MG_CHECK(gzip_file_ != nullptr, "cannot open gzipped IDX file '", path, "': ",
               std::strerror(errno), ".", kDatasetHint);
      gzbuffer(gzip_file_.get(), 256 * 1024);  // fewer, larger reads: MNIST images are ~26 MB
    } else {
      std::rewind(raw_file_.get());
    }
  }

  // Reads up to `count` bytes; returns fewer only at the end of the data. Throws on an
  // I/O error or a corrupt (or cut-off) gzip stream.
  size_t read(void* destination, size_t count) {
    if (raw_file_) {
      const size_t got = std::fread(destination, 1, count, raw_file_.get());
      check_raw_stream();
      return got;
    }
    auto* out = static_cast<uint8_t*>(destination);
    size_t total = 0;
    while (total < count) {
      // gzread takes an unsigned length and returns an int: keep requests below INT_MAX.
      const auto want = static_cast<unsigned>(std::min<size_t>(count - total, INT_MAX / 2));
      const int got = gzread(gzip_file_.get(), out + total, want);
      if (got < 0) throw_gzip_error();
      total += static_cast<size_t>(got);
      if (static_cast<unsigned>(got) < want) {
        // A short read is either the clean end of the stream or a damaged one.
        int zlib_error = Z_OK;
        gzerror(gzip_file_.get(), &zlib_error);
        if (zlib_error != Z_OK) throw_gzip_error();
        break;
      }
    }
    return total;
  }

 private:
  struct CloseRawFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  struct CloseGzipFile {
    void operator()(gzFile file) const { gzclose(file); }
  };

  void check_raw_stream() {
    MG_CHECK(!std::ferror(raw_file_.get()), "error reading IDX file '", path_, "': ",
             std::strerror(errno), ".");
  }

  [[noreturn]] void throw_gzip_error() {
    int zlib_error = Z_OK;
    const char* message = gzerror(gzip_file_.get(), &zlib_error);
    detail::throw_error(detail::str_cat(
        "IDX file '", path_, "' is a corrupt or incomplete gzip file (zlib: ",
        message ? message : "unknown error", "). Download it again.", kDatasetHint));
  }

  std::string path_;
  std::unique_ptr<std::FILE, CloseRawFile> raw_file_;
  std::unique_ptr<gzFile_s, CloseGzipFile> gzip_file_;
};

uint32_t read_big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

void big_endian_to_host(std::vector<uint8_t>& bytes, size_t element_size) {
  if constexpr (std::endian::native == std::endian::big) return;
  if (element_size == 1) return;
  for (size_t offset = 0; offset + element_size <= bytes.size(); offset += element_size)
    std::reverse(bytes.begin() + offset, bytes.begin() + offset + element_size);
}

}  // namespace

size_t idx_element_size(IdxType type) {
  switch (type) {
    case IdxType::UnsignedByte: return 1;
    case IdxType::SignedByte: return 1;
    case IdxType::Short: return 2;
    case IdxType::Int: return 4;
    case IdxType::Float: return 4;
    case IdxType::Double: return 8;
  }
  MG_ASSERT(false, "unknown IdxType ", static_cast<int>(type));
  return 0;
}

const char* idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::UnsignedByte: return "ubyte";
    case IdxType::SignedByte: return "sbyte";
    case IdxType::Short: return "short";
    case IdxType::Int: return "int";
    case IdxType::Float: return "float";
    case IdxType::Double: return "double";
  }
  return "unknown";
}

int64_t IdxArray::element_count() const {
  if (dims.empty()) return 0;  // nothing has been read into this array
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return count;
}

IdxArray read_idx(const std::string& path) {
  ByteSource source(path);

  // Magic: 0, 0, type code, number of dims.
  uint8_t magic[4] = {0, 0, 0, 0};
  const size_t magic_bytes = source.read(magic, 4);
  const bool zero_prefix = (magic_bytes < 1 || magic[0] == 0) && (magic_bytes < 2 || magic[1] == 0);
  MG_CHECK(zero_prefix, "IDX file '", path, "' has a bad magic number: its first two bytes are ",
           hex_byte(magic[0]), " ", hex_byte(magic[1]),
           ", an IDX file starts with 0x00 0x00 (is this an IDX file?)");
  MG_CHECK(magic_bytes == 4, "IDX file '", path, "' has a truncated header: the file ends after ",
           magic_bytes, " bytes, the magic number alone needs 4.");
  MG_CHECK(is_known_type_code(magic[2]), "IDX file '", path, "' has an unknown element type code ",
           hex_byte(magic[2]), " (known: 0x08 ubyte, 0x09 sbyte, 0x0B short, 0x0C int, "
           "0x0D float, 0x0E double).");
  const int dim_count = magic[3];
  MG_CHECK(dim_count >= 1 && dim_count <= 4, "IDX file '", path, "' has a bad magic number: it "
           "announces ", dim_count, " dims, memgrad reads IDX files with 1 to 4 dims.");

  IdxArray array;
  array.type = static_cast<IdxType>(magic[2]);
  const size_t element_size = idx_element_size(array.type);

  uint8_t dim_bytes[4 * 4];
  const size_t dim_bytes_read = source.read(dim_bytes, 4 * static_cast<size_t>(dim_count));
  MG_CHECK(dim_bytes_read == 4 * static_cast<size_t>(dim_count), "IDX file '", path,
           "' has a truncated header: it announces ", dim_count, " dims (", 4 * dim_count,
           " bytes) but the file ends after ", dim_bytes_read, " of them.");

  // NOTE: the product is checked for overflow: four dims of 2^32-1 would wrap an int64.
  uint64_t data_bytes = element_size;
  bool too_large = false;
  for (int i = 0; i < dim_count; ++i) {
    const uint32_t dim = read_big_endian_u32(dim_bytes + 4 * i);
    array.dims.push_back(dim);
    too_large = too_large || __builtin_mul_overflow(data_bytes, uint64_t{dim}, &data_bytes);
  }
  too_large = too_large || data_bytes > static_cast<uint64_t>(INT64_MAX);
  MG_CHECK(!too_large, "IDX file '", path, "' has a corrupt header: dims ",
           dims_to_string(array.dims), " of ", idx_type_name(array.type),
           " would need more than 2^63 bytes.");

  // Read in chunks so memory grows only with bytes the file really holds.
  while (array.bytes.size() < data_bytes) {
    const size_t already = array.bytes.size();
    const size_t want = std::min<uint64_t>(kReadChunkBytes, data_bytes - already);
    array.bytes.resize(already + want);
    const size_t got = source.read(array.bytes.data() + already, want);
    array.bytes.resize(already + got);
    if (got < want) break;
  }
  MG_CHECK(array.bytes.size() == data_bytes, "IDX file '", path, "' is truncated: its header "
           "announces dims ", dims_to_string(array.dims), " of ", idx_type_name(array.type), " (",
           data_bytes, " bytes of data) but the file holds only ", array.bytes.size(),
           " bytes of data. Download it again.");

  uint64_t trailing_bytes = 0;
  uint8_t scratch[4096];
  for (size_t got; (got = source.read(scratch, sizeof scratch)) > 0;) trailing_bytes += got;
  MG_CHECK(trailing_bytes == 0, "IDX file '", path, "' has ", trailing_bytes,
           " bytes after the end of its data: the header announces dims ",
           dims_to_string(array.dims), " of ", idx_type_name(array.type), " (", data_bytes,
           " bytes of data). The file is damaged or its header is wrong.");

  big_endian_to_host(array.bytes, element_size);
  return array;
}

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  std::vector<std::string> names = {stem, stem + ".gz"};
  // Some mirrors spell "train-images-idx3-ubyte" as "train-images.idx3-ubyte"; accept both.
  std::string other_spelling = stem;
  if (const size_t at = stem.find("-idx"); at != std::string::npos) {
    other_spelling[at] = '.';
  } else if (const size_t dot_at = stem.find(".idx"); dot_at != std::string::npos) {
    other_spelling[dot_at] = '-';
  }
  if (other_spelling != stem) {
    names.push_back(other_spelling);
    names.push_back(other_spelling + ".gz");
  }

  std::string looked_for;
  for (const std::string& name : names) {
    const std::string candidate = (std::filesystem::path(dir) / name).string();
    std::error_code error;
    if (std::filesystem::is_regular_file(candidate, error)) return candidate;
    looked_for += (looked_for.empty() ? "" : ", ") + candidate;
  }
  std::error_code error;
  const bool dir_exists = std::filesystem::is_directory(dir, error);
  MG_CHECK(false, "no IDX file '", stem, "' in folder '", dir, "'",
           dir_exists ? "" : " (the folder does not exist)", ": looked for ", looked_for, ".",
           kDatasetHint);
  return {};
}

}  // namespace mg::data
