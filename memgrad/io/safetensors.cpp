// io/safetensors.cpp — the safetensors writer (atomic: temporary file, fsync, rename,
// fsync of the directory; optionally a CRC-32 of the data) and its strict reader.
#include "memgrad/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <unordered_set>

#include "memgrad/core/factory.h"
#include "memgrad/io/crc32.h"
#include "memgrad/io/json.h"
#include "memgrad/io/json_parse.h"

namespace mg {

namespace {

constexpr size_t kHeaderLengthBytes = 8;
// The reference implementation pads the header so the data starts 8-byte aligned.
constexpr size_t kHeaderAlignment = 8;
constexpr const char* kMetadataKey = "__metadata__";

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Int64: return "I64";
    case DType::Int32: return "I32";
    case DType::UInt8: return "U8";
    case DType::Bool: return "BOOL";
  }
  MG_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

bool parse_safetensors_dtype(const std::string& name, DType& dtype) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == safetensors_dtype_name(static_cast<DType>(i))) {
      dtype = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

// ---- writing ----

// Writes all of `bytes` to `fd`, retrying short writes and interruptions.
bool write_all(int fd, const char* bytes, size_t count) {
  while (count > 0) {
    ssize_t written = ::write(fd, bytes, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes += written;
    count -= static_cast<size_t>(written);
  }
  return true;
}

// Removes the temporary file unless release() is called: every error path cleans up.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  int& fd() { return fd_; }
  void release() { released_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool released_ = false;
};

std::string system_error_text() { return std::strerror(errno); }

// ---- reading ----

struct TensorEntry {
  std::string name;
  DType dtype = DType::Float32;
  Shape sizes;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

struct Header {
  std::vector<std::pair<std::string, std::string>> metadata;  // without the checksum
  std::optional<uint32_t> crc32;  // of the data section, when the file records one
  std::vector<TensorEntry> entries;  // in the header's order
  uint64_t data_start = 0;           // byte offset of the data section in the file
};

const JsonValue& member(const JsonValue& object, const std::string& key, JsonValue::Kind kind,
                        const std::string& where) {
  for (const auto& [name, value] : object.members) {
    if (name != key) continue;
    MG_CHECK(value.kind == kind, where, ": \"", key, "\" is ", json_kind_name(value.kind),
             ", expected ", json_kind_name(kind));
    return value;
  }
  MG_CHECK(false, where, ": \"", key, "\" is missing");
}

TensorEntry parse_entry(const std::string& name, const JsonValue& info, const std::string& where) {
  MG_CHECK(info.kind == JsonValue::Kind::Object, where, " is ", json_kind_name(info.kind),
           ", expected an object with dtype, shape and data_offsets");
  for (const auto& [key, value] : info.members) {
    MG_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where, ": unexpected key \"",
             key, "\" (expected dtype, shape and data_offsets)");
  }
  TensorEntry entry;
  entry.name = name;
  const std::string& dtype_text = member(info, "dtype", JsonValue::Kind::String, where).string;
  MG_CHECK(parse_safetensors_dtype(dtype_text, entry.dtype), where, ": unknown dtype \"", dtype_text,
           "\". memgrad reads F32, F64, F16, BF16, I64, I32, U8 and BOOL; convert the tensor to one "
           "of these before saving");

  const JsonValue& shape = member(info, "shape", JsonValue::Kind::Array, where);
  MG_CHECK(shape.elements.size() <= static_cast<size_t>(kMaxDims), where, ": shape has ",
           shape.elements.size(), " dimensions; memgrad tensors have at most ", kMaxDims);
  // numel may not overflow: it is compared with a byte range that fits in the file.
  uint64_t numel = 1;
  bool overflow = false, has_zero_dim = false;
  // NOTE: the non-zero sizes must multiply within int64 even when a zero size leaves the
  // tensor empty: its strides (and Shape::numel on its way to the zero) are their products.
  int64_t nonzero_product = 1;
  bool nonzero_overflow = false;
  for (const JsonValue& size : shape.elements) {
    MG_CHECK(size.kind == JsonValue::Kind::Integer && size.integer >= 0, where,
             ": shape entries must be non-negative integers");
    entry.sizes.push_back(size.integer);
    uint64_t dim = static_cast<uint64_t>(size.integer);
    if (dim == 0) has_zero_dim = true;
    uint64_t product = 0;
    overflow = overflow || __builtin_mul_overflow(numel, dim, &product);
    numel = product;
    nonzero_overflow = nonzero_overflow ||
                       __builtin_mul_overflow(nonzero_product, std::max<int64_t>(size.integer, 1), &nonzero_product);
  }
  if (has_zero_dim) {  // zero elements, however large the other sizes
    MG_CHECK(!nonzero_overflow, where, ": shape ", entry.sizes, " has no elements, but its other sizes "
             "multiply to more than 2^63 - 1, beyond what a tensor's strides can hold. Hint: the file is "
             "corrupt; an empty tensor's sizes are small numbers and a 0");
    overflow = false;
    numel = 0;
  }

  const JsonValue& offsets = member(info, "data_offsets", JsonValue::Kind::Array, where);
  MG_CHECK(offsets.elements.size() == 2, where, ": data_offsets has ", offsets.elements.size(),
           " entries, expected [begin, end]");
  for (const JsonValue& offset : offsets.elements) {
    MG_CHECK(offset.kind == JsonValue::Kind::Integer && offset.integer >= 0, where,
             ": data_offsets must be non-negative integers");
  }
  entry.begin = static_cast<uint64_t>(offsets.elements[0].integer);
  entry.end = static_cast<uint64_t>(offsets.elements[1].integer);
  MG_CHECK(entry.begin <= entry.end, where, ": data_offsets [", entry.begin, ", ", entry.end,
           "] end before they begin");
  uint64_t bytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, element_size(entry.dtype), &bytes);
  MG_CHECK(!overflow && entry.end - entry.begin == bytes, where,
           ": shape ", entry.sizes, " of ", dtype_text, " needs ",
           overflow ? std::string("more than 2^64") : std::to_string(bytes),
           " bytes but data_offsets [", entry.begin, ", ", entry.end, "] hold ", entry.end - entry.begin);
  return entry;
}

// The checksum a file's metadata records: exactly 8 hex digits.
uint32_t parse_crc32(const std::string& text, const std::string& where) {
  const bool hex = text.size() == 8 && text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  MG_CHECK(hex, where, ": __metadata__ \"", kCrc32MetadataKey, "\" is \"", text, "\", expected the data's ",
           "CRC-32 as 8 hex digits. Hint: the header is damaged; use another copy of the file");
  return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
}

// Reads and checks the header of the open file `in` of `file_size` bytes.
Header read_header(std::ifstream& in, uint64_t file_size, const std::string& path) {
  const std::string where = "safetensors file '" + path + "'";
  MG_CHECK(file_size >= kHeaderLengthBytes, where, " is ", file_size,
           " bytes, too short to hold the 8-byte header length. Hint: the file is truncated or "
           "not a safetensors file");
  unsigned char length_bytes[kHeaderLengthBytes];
  in.read(reinterpret_cast<char*>(length_bytes), kHeaderLengthBytes);
  MG_CHECK(in, "could not read ", where);
  uint64_t header_length = 0;
  for (size_t i = 0; i < kHeaderLengthBytes; ++i) header_length |= uint64_t{length_bytes[i]} << (8 * i);
  MG_CHECK(header_length <= file_size - kHeaderLengthBytes, where, ": header length ", header_length,
           " goes beyond the end of the file (", file_size,
           " bytes). Hint: the file is truncated or not a safetensors file");

  std::string text(header_length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_length));
  MG_CHECK(in, "could not read the header of ", where);
  MG_CHECK(!text.empty() && text.front() == '{', where,
           ": the header does not start with '{'. Hint: the file is corrupt or not a safetensors file");
  JsonValue root = parse_json(text, where + ": header");

  Header header;
  header.data_start = kHeaderLengthBytes + header_length;
  for (const auto& [name, value] : root.members) {
    if (name == kMetadataKey) {
      MG_CHECK(value.kind == JsonValue::Kind::Object, where, ": __metadata__ is ",
               json_kind_name(value.kind), ", expected an object of strings");
      for (const auto& [key, text_value] : value.members) {
        MG_CHECK(text_value.kind == JsonValue::Kind::String, where, ": __metadata__ value of \"", key,
                 "\" is ", json_kind_name(text_value.kind), ", expected a string");
        if (key == kCrc32MetadataKey) {
          header.crc32 = parse_crc32(text_value.string, where);
        } else {
          header.metadata.emplace_back(key, text_value.string);
        }
      }
      continue;
    }
    header.entries.push_back(parse_entry(name, value, where + ": tensor \"" + name + "\""));
  }

  // The byte ranges must tile the data section exactly: no overlap, no gap, nothing after.
  std::vector<const TensorEntry*> by_offset;
  for (const TensorEntry& entry : header.entries) by_offset.push_back(&entry);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  uint64_t expected_begin = 0;
  for (const TensorEntry* entry : by_offset) {
    MG_CHECK(entry->begin == expected_begin, where, ": tensor \"", entry->name, "\" has data_offsets [",
             entry->begin, ", ", entry->end, "] but the previous tensor ends at byte ", expected_begin,
             entry->begin < expected_begin ? " (the ranges overlap)" : " (a gap)");
    expected_begin = entry->end;
  }
  uint64_t data_size = file_size - header.data_start;
  MG_CHECK(expected_begin == data_size, where, ": the tensors hold ", expected_begin,
           " bytes of data but the file has ", data_size, " after the header",
           expected_begin > data_size ? ". Hint: the file is truncated" : "");
  return header;
}

// Opens `path` for reading and returns its size.
uint64_t open_for_reading(std::ifstream& in, const std::string& path) {
  std::error_code error;
  uintmax_t size = std::filesystem::file_size(path, error);
  MG_CHECK(!error, "could not read safetensors file '", path, "': ", error.message());
  in.open(path, std::ios::binary);
  MG_CHECK(in.is_open(), "could not open safetensors file '", path, "' for reading: ",
           system_error_text());
  return size;
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata, Checksum checksum) {
  // Check everything before creating any file.
  std::unordered_set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    MG_CHECK(name != kMetadataKey, "save_safetensors('", path, "'): \"", kMetadataKey,
             "\" is reserved for the metadata and cannot name a tensor");
    MG_CHECK(names.insert(name).second, "save_safetensors('", path, "'): the tensor name \"", name,
             "\" is given twice. Hint: every tensor needs its own name");
    MG_CHECK(tensor.defined(), "save_safetensors('", path, "'): tensor \"", name, "\" is undefined");
  }
  std::unordered_set<std::string> metadata_keys;
  for (const auto& [key, value] : metadata) {
    MG_CHECK(metadata_keys.insert(key).second, "save_safetensors('", path, "'): the metadata key \"",
             key, "\" is given twice");
    MG_CHECK(key != kCrc32MetadataKey, "save_safetensors('", path, "'): the metadata key \"", key,
             "\" is the format's own (the data's checksum). Hint: pass Checksum::Crc32 to have it written");
  }

  // Sorted by name, as the reference writes them; the data follows in the same order.
  std::vector<std::pair<std::string, Tensor>> host;
  for (const auto& [name, tensor] : tensors) {
    bool usable = tensor.device().is_cpu() && tensor.is_contiguous();
    host.emplace_back(name, usable ? tensor : converted_copy(tensor, tensor.dtype(), Device::cpu()));
  }
  std::sort(host.begin(), host.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> file_metadata = metadata;
  if (checksum == Checksum::Crc32) {
    Crc32 data_crc;  // the data section is the tensors' bytes in this order
    for (const auto& [name, tensor] : host) data_crc.update(tensor.raw_data(), tensor.nbytes());
    file_metadata.emplace_back(kCrc32MetadataKey, crc32_hex(data_crc.value()));
  }

  JsonWriter json;
  json.begin_object();
  if (!file_metadata.empty()) {
    json.key(kMetadataKey).begin_object();
    for (const auto& [key, value] : file_metadata) json.key(key).value(value);
    json.end_object();
  }
  uint64_t offset = 0;
  for (const auto& [name, tensor] : host) {
    json.key(name).begin_object().key("dtype").value(safetensors_dtype_name(tensor.dtype()));
    json.key("shape").begin_array();
    for (int64_t size : tensor.sizes()) json.value(size);
    json.end_array();
    json.key("data_offsets").begin_array().value(offset).value(offset + tensor.nbytes()).end_array();
    json.end_object();
    offset += tensor.nbytes();
  }
  json.end_object();
  std::string header = json.str();
  header.append((kHeaderAlignment - header.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  char length_bytes[kHeaderLengthBytes];
  for (size_t i = 0; i < kHeaderLengthBytes; ++i) {
    length_bytes[i] = static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xFF);
  }

  const std::string temporary_path = path + ".tmp";
  TemporaryFile temporary(temporary_path);
  temporary.fd() = ::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (temporary.fd() < 0) {
    temporary.release();  // nothing was created
    MG_CHECK(false, "save_safetensors: could not create '", temporary_path, "': ", system_error_text(),
             ". Hint: check that the directory exists and is writable");
  }
  bool written = write_all(temporary.fd(), length_bytes, kHeaderLengthBytes) &&
                 write_all(temporary.fd(), header.data(), header.size());
  for (const auto& [name, tensor] : host) {
    if (!written) break;
    written = write_all(temporary.fd(), static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  }
  MG_CHECK(written, "save_safetensors: could not write '", temporary_path, "': ", system_error_text(),
           ". Hint: is the disk full?");
  // NOTE: fsync before rename, or a crash soon after could leave `path` naming an empty file.
  MG_CHECK(::fsync(temporary.fd()) == 0, "save_safetensors: could not sync '", temporary_path,
           "' to disk: ", system_error_text());
  int fd = temporary.fd();
  temporary.fd() = -1;
  MG_CHECK(::close(fd) == 0, "save_safetensors: could not close '", temporary_path, "': ",
           system_error_text());

  std::error_code error;
  std::filesystem::rename(temporary_path, path, error);
  MG_CHECK(!error, "save_safetensors: could not rename '", temporary_path, "' to '", path, "': ",
           error.message(), ". The previous file at '", path, "' (if any) is unchanged");
  temporary.release();
  // Make the rename itself durable; a failure here loses nothing already written.
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  int directory_fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path, Device device) {
  std::ifstream in;
  uint64_t file_size = open_for_reading(in, path);
  Header header = read_header(in, file_size, path);

  // Read in file order (the ranges tile the data section), so that the checksum sees the
  // data section's bytes as they lie.
  std::vector<size_t> file_order(header.entries.size());
  for (size_t i = 0; i < file_order.size(); ++i) file_order[i] = i;
  std::stable_sort(file_order.begin(), file_order.end(),
                   [&](size_t a, size_t b) { return header.entries[a].begin < header.entries[b].begin; });
  std::vector<Tensor> host(header.entries.size());
  Crc32 data_crc;
  in.seekg(static_cast<std::streamoff>(header.data_start));
  for (size_t index : file_order) {
    const TensorEntry& entry = header.entries[index];
    host[index] = empty(entry.sizes, {.dtype = entry.dtype, .device = Device::cpu(),
                                      .category = MemoryCategory::Temporary});
    const size_t count = entry.end - entry.begin;
    if (count == 0) continue;
    in.read(static_cast<char*>(host[index].raw_data()), static_cast<std::streamsize>(count));
    MG_CHECK(in, "could not read the data of tensor \"", entry.name, "\" from safetensors file '", path,
             "'. Hint: the file changed or was truncated while being read");
    if (header.crc32) data_crc.update(host[index].raw_data(), count);
  }
  if (header.crc32) {
    MG_CHECK(data_crc.value() == *header.crc32, "safetensors file '", path, "' is damaged: its tensor data has ",
             "checksum (CRC-32) ", crc32_hex(data_crc.value()), " but the file records ", crc32_hex(*header.crc32),
             " (__metadata__ \"", kCrc32MetadataKey, "\"), so its bytes changed after it was written. Hint: a disk, ",
             "copy or transfer error, or an edit; use an earlier checkpoint, or copy the file again from where it ",
             "was written");
  }

  std::vector<std::pair<std::string, Tensor>> result;
  for (size_t index = 0; index < header.entries.size(); ++index) {
    const TensorEntry& entry = header.entries[index];
    Tensor tensor = std::move(host[index]);
    const size_t count = entry.end - entry.begin;
    if (entry.dtype == DType::Bool) {
      // Any byte other than 0 or 1 is not a C++ bool: reading it would be undefined.
      const auto* bytes = static_cast<const unsigned char*>(tensor.raw_data());
      for (size_t i = 0; i < count; ++i) {
        MG_CHECK(bytes[i] <= 1, "safetensors file '", path, "': tensor \"", entry.name,
                 "\" is BOOL but holds the byte ", int{bytes[i]}, " (only 0 and 1 are booleans)");
      }
    }
    if (!device.is_cpu()) {
      tensor = converted_copy(tensor, entry.dtype, device);
      tensor.set_memory_category(MemoryCategory::Temporary);
    }
    result.emplace_back(entry.name, std::move(tensor));
  }
  return result;
}

std::vector<std::pair<std::string, std::string>> read_safetensors_metadata(const std::string& path) {
  std::ifstream in;
  uint64_t file_size = open_for_reading(in, path);
  return read_header(in, file_size, path).metadata;
}

}  // namespace mg
