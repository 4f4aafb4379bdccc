// examples/common/summary.h — the files the programs write (--summary-json, --json,
// --memory-timeline): checked for writability before a run starts (a typo should not cost
// a training run) and written atomically after it (a crash mid-write never leaves half a
// file behind).
#pragma once

#include <string>

namespace examples {

// Creates and removes `path`'s temporary file; throws mg::Error naming `flag` when the
// folder is not writable.
void check_writable(const std::string& path, const std::string& flag);

// Writes `text` and a newline to path + ".tmp", then renames it over `path`.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace examples
