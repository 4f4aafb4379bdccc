// tests/fuzz/fuzz_support.h — what every fuzz target shares: the input as a file (the
// readers take paths) and the rule for the errors they throw.
//
// A reader given bad bytes must throw mg::Error that names the file (so a user knows
// which of their files is broken), never an internal error (an MG_ASSERT: a memgrad bug),
// another exception type, a crash, a hang or a leak. The sanitizers and libFuzzer catch the
// last four; refuse_unless_named() turns the others into a crash that libFuzzer reports
// with the input that caused it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "memgrad/core/error.h"

namespace fuzz {

// A folder of this process's own under the temporary directory, removed at exit, so that
// targets run side by side (or libFuzzer's -jobs) never share a file.
inline const std::filesystem::path& scratch_folder() {
  struct Folder {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("memgrad-fuzz-" + std::to_string(::getpid()));
    Folder() { std::filesystem::create_directories(path); }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

// Writes `size` bytes to `name` in the scratch folder and returns its path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_folder() / name).string();
  // NOTE: a new file each time, not the old one truncated: ext4 writes a truncated file's
  // new data to disk when it is closed (auto_da_alloc), which made each input 13x slower.
  std::filesystem::remove(path);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  file.close();
  if (!file) {
    std::fprintf(stderr, "fuzz: cannot write the input to '%s'\n", path.c_str());
    std::abort();
  }
  return path;
}

// Aborts (a finding) unless `error` is a user-facing mg::Error whose message names `subject`.
inline void refuse_unless_named(const mg::Error& error, std::string_view subject) {
  const std::string_view message = error.what();
  const bool internal = message.starts_with("memgrad internal error");
  if (!internal && message.find(subject) != std::string_view::npos) return;
  std::fprintf(stderr, "fuzz: %s\n  %s\n", internal ? "an internal error (a memgrad bug):"
                                                    : "an error that does not name the input:",
               error.what());
  std::abort();
}

}  // namespace fuzz
