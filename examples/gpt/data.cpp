// examples/gpt/data.cpp — reading the text and the split.
#include "examples/gpt/data.h"

#include <algorithm>
#include <cstdio>
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

// `count` bytes from `begin` as "E0 80".
std::string hex_bytes(const std::vector<uint8_t>& bytes, size_t begin, size_t count) {
  std::string text;
  for (size_t i = begin; i < begin + count && i < bytes.size(); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof byte, "%s%02X", text.empty() ? "" : " ", bytes[i]);
    text += byte;
  }
  return text;
}

// What is wrong with a sequence whose second byte `second` is a continuation byte outside
// the range its lead allows (Unicode's table 3-7), or nullptr when it is inside.
const char* second_byte_problem(uint8_t lead, uint8_t second) {
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xF0 && second < 0x90)) return "an overlong form";
  if (lead == 0xED && second > 0x9F) return "a surrogate (U+D800..U+DFFF), which UTF-8 does not encode";
  if (lead == 0xF4 && second > 0x8F) return "a code point above U+10FFFF";
  return nullptr;
}

}  // namespace

std::optional<NotText> find_not_text(const std::vector<uint8_t>& bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t lead = bytes[i];
    if (lead == 0) return NotText{i, "a NUL byte (binary data)"};
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if (lead < 0xC0) return NotText{i, "a continuation byte that no sequence began (" + hex_bytes(bytes, i, 1) + ")"};
    // NOTE: C0 and C1 begin only overlong forms of ASCII; F5..FF only code points above U+10FFFF.
    if (lead < 0xC2) return NotText{i, "an overlong form (" + hex_bytes(bytes, i, 2) + ")"};
    if (lead > 0xF4) return NotText{i, "a byte that no UTF-8 sequence begins with (" + hex_bytes(bytes, i, 1) + ")"};
    const size_t length = lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const std::string sequence = "a " + std::to_string(length) + "-byte sequence";
    for (size_t k = 1; k < length; ++k) {
      if (i + k == bytes.size()) {
        return NotText{i, sequence + " cut short by the end of the text (" + hex_bytes(bytes, i, k) + ")"};
      }
      const uint8_t byte = bytes[i + k];
      if (byte < 0x80 || byte > 0xBF) {
        return NotText{i, sequence + " cut short: byte " + std::to_string(k + 1) + " is not a continuation byte (" +
                              hex_bytes(bytes, i, k + 1) + ")"};
      }
      if (const char* problem = k == 1 ? second_byte_problem(lead, byte) : nullptr) {
        return NotText{i, std::string(problem) + " (" + hex_bytes(bytes, i, length) + ")"};
      }
    }
    i += length;
  }
  return std::nullopt;
}

bool is_utf8_text(const std::vector<uint8_t>& bytes) { return !find_not_text(bytes).has_value(); }

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
    const std::optional<NotText> not_text = find_not_text(text);
    MG_CHECK(!not_text, "--data '", path, "' is not UTF-8 text: at byte offset ", not_text ? not_text->offset : 0, ", ",
             not_text ? not_text->problem : "", ". Hint: give a text file (UTF-8, without NUL bytes), or a folder of ",
             "them.");
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
