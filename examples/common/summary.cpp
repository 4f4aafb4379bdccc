// examples/common/summary.cpp — atomic writing of the examples' summary files.
#include "examples/common/summary.h"

#include <filesystem>
#include <fstream>

#include <memgrad/core/error.h>

namespace examples {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary);
    file << text << '\n';
    MG_CHECK(file.good(), "cannot write '", temporary, "' (the disk may be full or the folder gone).");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  MG_CHECK(!error, "cannot rename '", temporary, "' to '", path, "': ", error.message(), ".");
}

}  // namespace examples
