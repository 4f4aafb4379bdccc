// examples/common/output_path.h — the files a program will write (--save, --summary-json,
// --memory-timeline, ...), checked with its command line, before any work starts: a typo
// in a folder name must not cost a training run that dies at its first save.
//
// A path passes when its folder exists and a file can be created in it (a probe file is
// created there and removed: the files are written beside their target and renamed over
// it, summary.h's write_file_atomically), and it names neither a folder nor an existing
// file that is not a regular file (a device, a pipe: the rename would replace it). An
// existing target is left as it is.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace examples {

// Throws UsageError naming `flag`, `path` and why: no such folder, permission denied (or
// another reason the folder refuses a new file), is a folder, not a regular file.
void check_output_path(const std::string& flag, const std::string& path);

// check_output_path for each (flag, path) whose path is not empty, and refuses two flags
// that name the same file (the second write would replace the first).
void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace examples
