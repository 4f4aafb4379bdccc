// examples/gpt/data.cpp — reading the text and the split.
#include "examples/gpt/data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <memgrad/core/error.h>

namespace gpt {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  MG_CHECK(file.good(), "--data: cannot open '", path.string(), "' for reading.");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// The bytes a UTF-8 sequence that starts with `lead` takes (0: not a valid lead byte).
// NOTE: 0xC0, 0xC1 (overlong two-byte forms) and 0xF5.. (beyond U+10FFFF) never lead.
int sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

bool is_utf8_text(const std::vector<uint8_t>& bytes) {
  for (size_t i = 0; i < bytes.size();) {
    if (bytes[i] == 0) return false;
    const int length = sequence_length(bytes[i]);
    if (length == 0 || i + length > bytes.size()) return false;
    for (int k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

TextCorpus load_corpus(const std::string& path) {
  TextCorpus corpus{.source = path};
  std::error_code error;
  // status() follows symlinks: a link to a file is that file.
  const fs::file_status status = fs::status(path, error);
  MG_CHECK(fs::exists(status), "--data '", path, "' does not exist. Hint: the default, /usr/share/games/fortunes, ",
           "comes with Debian's `fortunes` package (scripts/install-deps installs it); or give --data FILE|DIR of ",
           "UTF-8 text.");
  std::vector<uint8_t> text;
  if (fs::is_regular_file(status)) {
    text = read_bytes(path);
    MG_CHECK(is_utf8_text(text), "--data '", path, "' is not UTF-8 text (it holds NUL bytes or invalid UTF-8). ",
             "Hint: give a text file, or a folder of them.");
    corpus.files.push_back(path);
  } else {
    MG_CHECK(fs::is_directory(status), "--data '", path, "' is neither a file nor a folder.");
    std::vector<fs::path> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file(error)) names.push_back(entry.path());  // follows symlinks
    }
    std::sort(names.begin(), names.end());
    // NOTE: fortune's folder has "cookie" and "cookie.u8", a symlink to it: each file once,
    // under the first of its names.
    std::set<fs::path> seen;
    for (const fs::path& name : names) {
      if (!seen.insert(fs::canonical(name)).second) continue;
      std::vector<uint8_t> bytes = read_bytes(name);
      if (!is_utf8_text(bytes)) {
        corpus.skipped.push_back(name.filename().string());
        continue;
      }
      text.insert(text.end(), bytes.begin(), bytes.end());
      corpus.files.push_back(name.filename().string());
    }
  }
  MG_CHECK(!text.empty(), "--data '", path, "' holds no text: ",
           corpus.files.empty() ? "no UTF-8 text file in the folder" : "its files are empty", ".");
  const size_t validation_bytes = text.size() / 10;
  corpus.train.assign(text.begin(), text.end() - static_cast<std::ptrdiff_t>(validation_bytes));
  corpus.validation.assign(text.end() - static_cast<std::ptrdiff_t>(validation_bytes), text.end());
  return corpus;
}

void check_fits_windows(const TextCorpus& corpus, int64_t block_size) {
  const auto validation = static_cast<int64_t>(corpus.validation.size());
  const auto total = static_cast<int64_t>(corpus.train.size()) + validation;
  MG_CHECK(validation >= block_size + 1, "the text of '", corpus.source, "' is too short for a block of ",
           block_size, " bytes: of its ", total, " bytes the validation part (the last 10%) holds ", validation,
           ", fewer than the ", block_size + 1, " a window takes (block + 1 for the targets). Hint: give at least ",
           10 * (block_size + 1), " bytes of text, or a smaller --block.");
}

}  // namespace gpt
