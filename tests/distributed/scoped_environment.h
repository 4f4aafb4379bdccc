// tests/distributed/scoped_environment.h — environment variables set for a scope, then
// removed: the launch variables init_process_group reads (RANK, WORLD_SIZE, ...). None of
// them is set before: ctest starts these tests without a launcher.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace mg_test {

class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(std::vector<std::pair<std::string, std::string>> variables)
      : variables_(std::move(variables)) {
    for (const auto& [name, value] : variables_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    for (const auto& variable : variables_) ::unsetenv(variable.first.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> variables_;
};

}  // namespace mg_test
