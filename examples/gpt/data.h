// examples/gpt/data.h — the text a GPT trains on, as bytes: read from a file or a folder,
// and split once (the last 10% of the bytes is the validation part). The model reads it
// as windows of block_size + 1 bytes (examples/gpt/windows.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

struct TextCorpus {
  std::string source;                 // the --data path
  std::vector<std::string> files{};     // the files read, in order
  std::vector<std::string> skipped{};   // files in the folder that are not UTF-8 text
  std::vector<uint8_t> train{};         // the first 90% of the bytes
  std::vector<uint8_t> validation{};    // the last 10%
};

// Reads `path`: a UTF-8 text file, or a folder whose regular files (symlinks followed, each
// file read once however many names lead to it) are read in name order and joined, leaving
// out those that are not UTF-8 text (binary index files such as fortune's .dat; NUL bytes
// count as binary) and sub-folders. Throws mg::Error when the path is missing, a file
// named on its own is not UTF-8 text, or no text is found.
TextCorpus load_corpus(const std::string& path);

// Throws mg::Error, with the byte counts and a hint, unless both parts hold a window of
// block_size + 1 bytes.
void check_fits_windows(const TextCorpus& corpus, int64_t block_size);

// Where bytes stop being text: the offset of the first byte that is NUL or not part of a
// well-formed UTF-8 sequence (Unicode's table 3-7: no overlong forms, no surrogates
// U+D800..DFFF, nothing above U+10FFFF, no truncated sequence or stray continuation byte;
// for a sequence that goes wrong, the offset of its first byte), and what is wrong there.
struct NotText {
  size_t offset = 0;
  std::string problem;  // "a NUL byte (binary data)", "an overlong form (E0 80)", ...
};
std::optional<NotText> find_not_text(const std::vector<uint8_t>& bytes);

// Whether `bytes` is valid UTF-8 without NUL bytes (what this program calls text).
bool is_utf8_text(const std::vector<uint8_t>& bytes);

}  // namespace gpt
