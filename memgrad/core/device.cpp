// core/device.cpp — device names and parsing.
#include "memgrad/core/device.h"

#include <charconv>

#include "memgrad/core/error.h"

namespace mg {

std::string Device::str() const {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda:" + std::to_string(index);
    case DeviceType::Simulated: return "simulated:" + std::to_string(index);
  }
  return "unknown";
}

Device Device::parse(std::string_view text) {
  auto colon = text.find(':');
  std::string_view kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    std::string_view digits = text.substr(colon + 1);
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    MG_CHECK(error == std::errc() && end == digits.data() + digits.size() && index >= 0,
             "invalid device '", text, "': the index after ':' must be a non-negative integer");
  }
  if (kind == "cpu") {
    MG_CHECK(index == 0, "invalid device '", text, "': the CPU has only index 0");
    return cpu();
  }
  if (kind == "cuda") return cuda(index);
  if (kind == "simulated") return simulated(index);
  MG_CHECK(false, "invalid device '", text, "'. Hint: use cpu, cuda, cuda:N or simulated:N.");
}

}  // namespace mg
