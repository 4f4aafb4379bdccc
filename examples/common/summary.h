// examples/common/summary.h — the files the programs write (--summary-json, --json,
// --memory-timeline): written atomically after a run (a crash mid-write never leaves half a
// file behind). Their paths are checked with the command line, before the run starts
// (output_path.h).
#pragma once

#include <string>

namespace examples {

// Writes `text` and a newline to path + ".tmp", then renames it over `path`.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace examples
