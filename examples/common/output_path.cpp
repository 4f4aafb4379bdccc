// examples/common/output_path.cpp — checking an output path: its folder, a probe file, the
// target's kind.
#include "examples/common/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "examples/common/cli.h"

namespace examples {
namespace {

namespace fs = std::filesystem;

std::string why_not_writable(int error) {
  if (error == EACCES || error == EPERM) return "permission denied";
  if (error == EROFS) return "read-only file system";
  if (error == ENOSPC || error == EDQUOT) return "no space left";
  return std::strerror(error);
}

}  // namespace

void check_output_path(const std::string& flag, const std::string& path) {
  const std::string named = flag + " '" + path + "'";
  if (path.empty()) throw UsageError(flag + " needs a file name");
  const fs::path target(path);
  std::error_code error;
  const fs::file_status status = fs::status(target, error);
  if (fs::is_directory(status)) throw UsageError(named + " is a folder; give a file name in it");
  if (!target.has_filename()) throw UsageError(named + " ends with '/'; give a file name");
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    throw UsageError(named + " exists and is not a regular file (the file is written beside it and renamed over it)");
  }
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const fs::file_status folder_status = fs::status(folder, error);
  if (!fs::exists(folder_status)) throw UsageError(named + ": no such folder '" + folder.string() + "'");
  if (!fs::is_directory(folder_status)) throw UsageError(named + ": '" + folder.string() + "' is not a folder");
  // NOTE: mkstemp creates a file of a fresh name (several ranks may probe one folder at
  // once), so the target and its neighbours are never touched.
  fs::path hidden_name(".");
  hidden_name += target.filename();
  hidden_name += ".probe-XXXXXX";
  std::string probe = (folder / hidden_name).string();
  const int descriptor = mkstemp(probe.data());
  if (descriptor < 0) {
    const int reason = errno;
    throw UsageError(named + " cannot be written: " + why_not_writable(reason) + " in folder '" + folder.string() + "'");
  }
  close(descriptor);
  unlink(probe.c_str());
}

void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (size_t j = 0; j < i; ++j) {
      const auto& [other_flag, other_path] = outputs[j];
      if (other_path.empty()) continue;
      std::error_code error, other_error;
      const fs::path resolved = fs::weakly_canonical(path, error);
      const fs::path other_resolved = fs::weakly_canonical(other_path, other_error);
      if (other_path == path || (!error && !other_error && resolved == other_resolved)) {
        throw UsageError(other_flag + " and " + flag + " name the same file '" + path + "'");
      }
    }
    check_output_path(flag, path);
  }
}

}  // namespace examples
